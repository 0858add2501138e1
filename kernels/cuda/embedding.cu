// CUDA kernels of kernels/embedding.h and kernels/bigram.h: row gathers with 16-byte packs, and the scatter-add
// backwards grouped by row (row_sort.cuh). Determinism: each table row's tokens are summed by one block in
// increasing token order in the accumulation type and added once, exactly as the CPU reference does, so the result
// is bitwise reproducible run to run (and matches the CPU in f32/f64 up to nothing at all). Ids outside the table
// (bad input, checked on the CPU path) make the forward write NaN rows and are skipped by the backward.
#include <algorithm>

#include "kernels/bigram.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/embedding_variants.h"
#include "kernels/cuda/row_sort.cuh"
#include "kernels/embedding.h"

namespace gpt::cuda {

namespace {

// out[t] = table[ids[t]] (⊙ sign[sign_ids[t]] when kSigned). One block handles tokens blockIdx.x, +gridDim.x, ...
template <typename T, typename A, int VEC, bool kSigned>
__global__ void gather_rows_kernel(const T* __restrict__ table, const int32_t* __restrict__ ids, int64_t n,
                                   int64_t rows, int d, const T* __restrict__ sign,
                                   const int32_t* __restrict__ sign_ids, int64_t sign_rows, T* __restrict__ out) {
  for (int64_t t = blockIdx.x; t < n; t += gridDim.x) {
    const int32_t id = ids[t];
    const int32_t sid = kSigned ? sign_ids[t] : 0;
    const bool valid = id >= 0 && id < rows && (!kSigned || (sid >= 0 && sid < sign_rows));
    T* dst = out + t * d;
    for (int c = threadIdx.x * VEC; c < d; c += blockDim.x * VEC) {
      Pack<T, VEC> v;
      if (!valid) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) v.v[j] = from_acc<T>(A(NAN));
      } else {
        v = load_pack<T, VEC>(table + static_cast<int64_t>(id) * d + c);
        if constexpr (kSigned) {
          const Pack<T, VEC> s = load_pack<T, VEC>(sign + static_cast<int64_t>(sid) * d + c);
#pragma unroll
          for (int j = 0; j < VEC; ++j) v.v[j] = from_acc<T>(to_acc<A>(v.v[j]) * to_acc<A>(s.v[j]));
        }
      }
      store_pack<T, VEC>(dst + c, v);
    }
  }
}

// v2 of the gather: one warp per token, tokens walked by one wave of warps; each lane issues the loads of up to
// kPacksInFlight packs of its row before the first store (v1, one pack per thread and one small block per token,
// kept the row's latency chain of id load → row load → store alone in flight: ≈ 1 TB/s on the H200).
constexpr int kGatherWarps = 8, kPacksInFlight = 4;

template <typename T, typename A, int VEC, bool kSigned>
__global__ void __launch_bounds__(kGatherWarps * 32)
    gather_rows_warp_kernel(const T* __restrict__ table, const int32_t* __restrict__ ids, int64_t n, int64_t rows,
                            int d, const T* __restrict__ sign, const int32_t* __restrict__ sign_ids,
                            int64_t sign_rows, T* __restrict__ out) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kGatherWarps;
  for (int64_t t = blockIdx.x * int64_t{kGatherWarps} + threadIdx.x / 32; t < n; t += warps) {
    const int32_t id = ids[t];
    const int32_t sid = kSigned ? sign_ids[t] : 0;
    const bool valid = id >= 0 && id < rows && (!kSigned || (sid >= 0 && sid < sign_rows));
    const T* src = table + static_cast<int64_t>(valid ? id : 0) * d;
    const T* sgn = kSigned ? sign + static_cast<int64_t>(valid ? sid : 0) * d : nullptr;
    T* dst = out + t * d;
    for (int c0 = 0; c0 < d; c0 += 32 * VEC * kPacksInFlight) {
      Pack<T, VEC> v[kPacksInFlight];
#pragma unroll
      for (int k = 0; k < kPacksInFlight; ++k) {
        const int c = c0 + (lane + 32 * k) * VEC;
        if (c >= d) break;
        if (!valid) {
#pragma unroll
          for (int j = 0; j < VEC; ++j) v[k].v[j] = from_acc<T>(A(NAN));
          continue;
        }
        v[k] = load_pack<T, VEC>(src + c);
        if constexpr (kSigned) {
          const Pack<T, VEC> s = load_pack<T, VEC>(sgn + c);
#pragma unroll
          for (int j = 0; j < VEC; ++j) v[k].v[j] = from_acc<T>(to_acc<A>(v[k].v[j]) * to_acc<A>(s.v[j]));
        }
      }
#pragma unroll
      for (int k = 0; k < kPacksInFlight; ++k) {
        const int c = c0 + (lane + 32 * k) * VEC;
        if (c < d) store_pack<T, VEC>(dst + c, v[k]);
      }
    }
  }
}

// One block per run of equal ids in sorted order: dtable[row] += Σ_{tokens of the run, in order} dout[t] (⊙ sign).
template <typename T, typename A, int VEC, bool kSigned>
__global__ void scatter_rows_kernel(const T* __restrict__ dout, const int32_t* __restrict__ sorted_ids,
                                    const int32_t* __restrict__ token_order, int64_t n, int64_t rows, int d,
                                    const T* __restrict__ sign, const int32_t* __restrict__ sign_ids,
                                    int64_t sign_rows, T* __restrict__ dtable) {
  for (int64_t pos = blockIdx.x; pos < n; pos += gridDim.x) {
    if (!starts_run(sorted_ids, pos)) continue;
    const int32_t row = sorted_ids[pos];
    if (row < 0 || row >= rows) continue;
    int64_t end = pos + 1;
    while (end < n && sorted_ids[end] == row) ++end;
    T* dst = dtable + static_cast<int64_t>(row) * d;
    for (int c = threadIdx.x * VEC; c < d; c += blockDim.x * VEC) {
      A acc[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[j] = A(0);
      for (int64_t i = pos; i < end; ++i) {
        const int64_t t = token_order[i];
        const Pack<T, VEC> g = load_pack<T, VEC>(dout + t * d + c);
        if constexpr (kSigned) {
          const int32_t sid = sign_ids[t];
          if (sid < 0 || sid >= sign_rows) continue;
          const Pack<T, VEC> s = load_pack<T, VEC>(sign + static_cast<int64_t>(sid) * d + c);
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[j] += to_acc<A>(g.v[j]) * to_acc<A>(s.v[j]);
        } else {
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[j] += to_acc<A>(g.v[j]);
        }
      }
      Pack<T, VEC> cur = load_pack<T, VEC>(dst + c);
#pragma unroll
      for (int j = 0; j < VEC; ++j) cur.v[j] = from_acc<T>(to_acc<A>(cur.v[j]) + acc[j]);
      store_pack<T, VEC>(dst + c, cur);
    }
  }
}

int threads_for(int d, int vec) {
  const int packs = (d + vec - 1) / vec;
  const int t = (packs + 31) / 32 * 32;
  return t < 32 ? 32 : (t > 256 ? 256 : t);
}

// Calls f.template operator()<T, A, VEC>() with 16-byte packs when every row starts 16-byte aligned.
template <typename F>
void dispatch_packed(DType dtype, int d, std::initializer_list<const void*> bases, const char* op, F&& f) {
  dispatch_floating_cuda(dtype, op, [&]<typename T, typename A>() {
    constexpr int kVec = kVec16<T>;
    bool packed = d % kVec == 0;
    for (const void* b : bases) packed = packed && (b == nullptr || aligned16(b));
    if (packed) {
      f.template operator()<T, A, kVec>();
    } else {
      f.template operator()<T, A, 1>();
    }
  });
}

template <bool kSigned>
void gather(const Tensor& table, const Tensor* sign, const Tensor& ids, const Tensor* sign_ids, Tensor& out,
            const char* op, int version) {
  const int d = static_cast<int>(table.size(1));
  const int64_t n = ids.numel(), rows = table.size(0);
  if (n == 0) return;
  const void* sign_base = kSigned ? sign->raw() : nullptr;
  dispatch_packed(table.dtype(), d, {table.raw(), out.raw(), sign_base}, op, [&]<typename T, typename A, int VEC>() {
    const T* sign_ptr = kSigned ? device_ptr<T>(*sign) : nullptr;
    const int32_t* sign_ids_ptr = kSigned ? device_ptr<int32_t>(*sign_ids) : nullptr;
    const int64_t sign_rows = kSigned ? sign->size(0) : 0;
    if (version == 1) {
      gather_rows_kernel<T, A, VEC, kSigned><<<blocks_for(n, 1), threads_for(d, VEC)>>>(
          device_ptr<T>(table), device_ptr<int32_t>(ids), n, rows, d, sign_ptr, sign_ids_ptr, sign_rows,
          device_ptr<T>(out));
    } else {
      const int64_t wave = int64_t{multiprocessor_count()} * (2048 / (kGatherWarps * 32));
      const auto blocks = static_cast<unsigned>(std::min<int64_t>(wave, (n + kGatherWarps - 1) / kGatherWarps));
      gather_rows_warp_kernel<T, A, VEC, kSigned><<<blocks, kGatherWarps * 32>>>(
          device_ptr<T>(table), device_ptr<int32_t>(ids), n, rows, d, sign_ptr, sign_ids_ptr, sign_rows,
          device_ptr<T>(out));
    }
  });
  GPT_CUDA_CHECK_LAUNCH();
}

template <bool kSigned>
void scatter(const Tensor& dout, const Tensor* sign, const Tensor& ids, const Tensor* sign_ids, Tensor& dtable,
             const char* op) {
  const int d = static_cast<int>(dtable.size(1));
  const int64_t n = ids.numel(), rows = dtable.size(0);
  if (n == 0) return;
  const TokensByRow groups = sort_tokens_by_row(device_ptr<int32_t>(ids), n, rows);
  const void* sign_base = kSigned ? sign->raw() : nullptr;
  dispatch_packed(dtable.dtype(), d, {dtable.raw(), dout.raw(), sign_base}, op, [&]<typename T, typename A, int VEC>() {
    scatter_rows_kernel<T, A, VEC, kSigned><<<blocks_for(n, 1), threads_for(d, VEC)>>>(
        device_ptr<T>(dout), groups.sorted_ids, groups.token_order, n, rows, d,
        kSigned ? device_ptr<T>(*sign) : nullptr, kSigned ? device_ptr<int32_t>(*sign_ids) : nullptr,
        kSigned ? sign->size(0) : 0, device_ptr<T>(dtable));
  });
  GPT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void embedding_forward_version(const Tensor& table, const Tensor& ids, Tensor& out, int version) {
  gather<false>(table, nullptr, ids, nullptr, out, "embedding_forward", version);
}

void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  embedding_forward_version(table, ids, out, kPromotedGather);
}

void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  scatter<false>(dout, nullptr, ids, nullptr, dtable, "embedding_backward");
}

void bigram_forward(const Tensor& embed, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids, Tensor& out) {
  gather<true>(embed, &sign, ids, &sign_ids, out, "bigram_forward", kPromotedGather);
}

void bigram_backward(const Tensor& dout, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids,
                     Tensor& dembed) {
  scatter<true>(dout, &sign, ids, &sign_ids, dembed, "bigram_backward");
}

}  // namespace gpt::cuda
