// CUDA kernels of kernels/ngram_embed.h (RECIPE §S.2). The forward gathers two signed rows per token, one warp per
// token; each product and the sum are single correctly rounded operations (never contracted), then one rounding to
// the storage type, exactly as the CPU reference. The backward groups the 2T entries by row with the stable sort
// of row_sort.cuh (entries of a row in increasing j, bigram entries before trigram entries) and sums each row's
// entries in one block in that order, then adds once into row_grad: the CPU reference's order and rounding points,
// so the result is bitwise the CPU's and the same from run to run.
#include <algorithm>

#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/row_sort.cuh"
#include "kernels/ngram_embed.h"

namespace gpt::cuda {

namespace {

constexpr int kForwardWarps = 8;     // tokens per block of the forward, one warp each
constexpr int kEntriesInFlight = 8;  // entries whose loads a backward thread issues before it adds them in order
constexpr int kMaxBackwardThreads = 256;

__device__ __forceinline__ bool in_table(int32_t id, int64_t rows) { return id >= 0 && id < rows; }

// out[t] = round(table[rows[t]] ⊙ pool[sign_rows[t]] + table[rows[n + t]] ⊙ pool[sign_rows[n + t]]).
template <typename T, typename A, int VEC>
__global__ void __launch_bounds__(kForwardWarps * 32)
    ngram_forward_kernel(const T* __restrict__ table, int64_t table_rows, const T* __restrict__ pool, int64_t pool_rows,
                         const int32_t* __restrict__ rows, const int32_t* __restrict__ sign_rows, int64_t n, int d,
                         T* __restrict__ out) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kForwardWarps;
  for (int64_t t = blockIdx.x * int64_t{kForwardWarps} + threadIdx.x / 32; t < n; t += warps) {
    const int32_t bigram_row = rows[t], trigram_row = rows[n + t];
    const int32_t bigram_sign = sign_rows[t], trigram_sign = sign_rows[n + t];
    const bool valid = in_table(bigram_row, table_rows) && in_table(trigram_row, table_rows) &&
                       in_table(bigram_sign, pool_rows) && in_table(trigram_sign, pool_rows);
    const T* b = table + static_cast<int64_t>(valid ? bigram_row : 0) * d;
    const T* c3 = table + static_cast<int64_t>(valid ? trigram_row : 0) * d;
    const T* bs = pool + static_cast<int64_t>(valid ? bigram_sign : 0) * d;
    const T* cs = pool + static_cast<int64_t>(valid ? trigram_sign : 0) * d;
    T* dst = out + t * d;
#pragma unroll 4
    for (int c = lane * VEC; c < d; c += 32 * VEC) {
      Pack<T, VEC> result;
      if (!valid) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) result.v[j] = from_acc<T>(A(NAN));
      } else {
        const Pack<T, VEC> bv = load_pack<T, VEC>(b + c), bsv = load_pack<T, VEC>(bs + c);
        const Pack<T, VEC> cv = load_pack<T, VEC>(c3 + c), csv = load_pack<T, VEC>(cs + c);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          const A sum =
              add_rn(mul_rn(to_acc<A>(bv.v[j]), to_acc<A>(bsv.v[j])), mul_rn(to_acc<A>(cv.v[j]), to_acc<A>(csv.v[j])));
          result.v[j] = from_acc<T>(sum);
        }
      }
      store_pack<T, VEC>(dst + c, result);
    }
  }
}

// One block per run of equal rows in sorted order: row_grad[row] += Σ_{entries j of the run, in order}
// dout[j mod n] ⊙ pool[sign_rows[j]], summed in A from zero and added once. The run is walked in chunks of
// blockDim.x entries: each thread stages one entry's offsets in shared memory (coalesced reads of the sorted
// order, and the run's end found by counting), then every thread adds the chunk's entries for its columns in order,
// with the loads of kEntriesInFlight entries issued before their adds.
template <typename T, typename A, int VEC>
__global__ void __launch_bounds__(kMaxBackwardThreads)
    ngram_backward_kernel(const T* __restrict__ dout, int64_t n, const T* __restrict__ pool, int64_t pool_rows,
                          const int32_t* __restrict__ sign_rows, const int32_t* __restrict__ sorted_rows,
                          const int32_t* __restrict__ entry_order, int64_t grad_rows, int d, A* __restrict__ row_grad) {
  __shared__ int64_t dout_offset[kMaxBackwardThreads];  // (j mod n)·d
  __shared__ int64_t sign_offset[kMaxBackwardThreads];  // sign row·d; -1: sign id outside the pool, entry skipped
  const int64_t entries = 2 * n;
  const int chunk = static_cast<int>(blockDim.x);
  for (int64_t pos = blockIdx.x; pos < entries; pos += gridDim.x) {
    if (!starts_run(sorted_rows, pos)) continue;  // the same answer for the whole block
    const int32_t row = sorted_rows[pos];
    if (!in_table(row, grad_rows)) continue;
    A* dst = row_grad + static_cast<int64_t>(row) * d;
    for (int c0 = 0; c0 < d; c0 += chunk * VEC) {
      const int c = c0 + static_cast<int>(threadIdx.x) * VEC;
      A acc[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[j] = A(0);
      for (int64_t begin = pos;; begin += chunk) {
        __syncthreads();  // the previous chunk's reads of the staged offsets are done
        const int64_t i = begin + threadIdx.x;
        const bool member = i < entries && sorted_rows[i] == row;  // members form a prefix of the chunk
        if (member) {
          const int64_t entry = entry_order[i];
          const int32_t sign = sign_rows[entry];
          dout_offset[threadIdx.x] = (entry % n) * d;
          sign_offset[threadIdx.x] = in_table(sign, pool_rows) ? static_cast<int64_t>(sign) * d : -1;
        }
        const int count = chunk - __syncthreads_count(!member);
        if (c < d) {
          for (int k0 = 0; k0 < count; k0 += kEntriesInFlight) {
            Pack<T, VEC> g[kEntriesInFlight], s[kEntriesInFlight];
            bool used[kEntriesInFlight];
#pragma unroll
            for (int u = 0; u < kEntriesInFlight; ++u) {
              const int k = k0 + u;
              used[u] = k < count && sign_offset[k] >= 0;
              if (!used[u]) continue;
              g[u] = load_pack<T, VEC>(dout + dout_offset[k] + c);
              s[u] = load_pack<T, VEC>(pool + sign_offset[k] + c);
            }
#pragma unroll
            for (int u = 0; u < kEntriesInFlight; ++u) {
              if (!used[u]) continue;
#pragma unroll
              for (int j = 0; j < VEC; ++j) {
                acc[j] = add_rn(acc[j], mul_rn(to_acc<A>(g[u].v[j]), to_acc<A>(s[u].v[j])));
              }
            }
          }
        }
        if (count < chunk) break;  // the run ended inside this chunk (the same for the whole block)
      }
      if (c < d) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) dst[c + j] = add_rn(dst[c + j], acc[j]);
      }
    }
  }
}

// Threads of a backward block: one per pack of a row, a whole number of warps between 32 and kMaxBackwardThreads.
int backward_threads(int d, int vec) {
  const int packs = (d + vec - 1) / vec;
  return std::clamp((packs + 31) / 32 * 32, 32, kMaxBackwardThreads);
}

// Calls f.template operator()<T, A, VEC>() with 16-byte packs when d and every base allow them.
template <typename F>
void dispatch_ngram(DType dtype, int d, std::initializer_list<const void*> bases, const char* op, F&& f) {
  dispatch_floating_cuda(dtype, op, [&]<typename T, typename A>() {
    constexpr int kVec = kVec16<T>;
    bool packed = d % kVec == 0;
    for (const void* base : bases) packed = packed && aligned16(base);
    if (packed) {
      f.template operator()<T, A, kVec>();
    } else {
      f.template operator()<T, A, 1>();
    }
  });
}

}  // namespace

void ngram_embed_forward(const Tensor& table, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                         Tensor& out) {
  const int64_t n = out.size(0);
  const int d = static_cast<int>(out.size(1));
  if (n == 0 || d == 0) return;
  dispatch_ngram(out.dtype(), d, {table.raw(), pool.raw(), out.raw()}, "ngram_embed_forward",
                 [&]<typename T, typename A, int VEC>() {
                   const int64_t wave = int64_t{multiprocessor_count()} * (2048 / (kForwardWarps * 32));
                   const auto blocks =
                       static_cast<unsigned>(std::min<int64_t>(wave, (n + kForwardWarps - 1) / kForwardWarps));
                   ngram_forward_kernel<T, A, VEC><<<blocks, kForwardWarps * 32, 0, op_stream()>>>(
                       device_ptr<T>(table), table.size(0), device_ptr<T>(pool), pool.size(0),
                       device_ptr<int32_t>(rows), device_ptr<int32_t>(sign_rows), n, d, device_ptr<T>(out));
                 });
  GPT_CUDA_CHECK_LAUNCH();
}

void ngram_embed_backward(const Tensor& dout, const Tensor& pool, const Tensor& rows, const Tensor& sign_rows,
                          Tensor& row_grad) {
  const int64_t n = dout.size(0);
  const int d = static_cast<int>(dout.size(1));
  if (n == 0 || d == 0) return;
  // The sort and its scratch live on the legacy default stream (row_sort.cu), so the kernel launches there too.
  const TokensByRow groups = sort_tokens_by_row(device_ptr<int32_t>(rows), 2 * n, row_grad.size(0));
  dispatch_ngram(dout.dtype(), d, {dout.raw(), pool.raw()}, "ngram_embed_backward",
                 [&]<typename T, typename A, int VEC>() {
                   ngram_backward_kernel<T, A, VEC><<<blocks_for(2 * n, 1), backward_threads(d, VEC)>>>(
                       device_ptr<T>(dout), n, device_ptr<T>(pool), pool.size(0), device_ptr<int32_t>(sign_rows),
                       groups.sorted_ids, groups.token_order, row_grad.size(0), d, device_ptr<A>(row_grad));
                 });
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace gpt::cuda
