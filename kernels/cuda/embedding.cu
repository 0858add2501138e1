// CUDA kernels of kernels/embedding.h and kernels/bigram.h: row gathers with 16-byte packs, and the scatter-add
// backwards grouped by row (row_sort.cuh). Determinism: scatter v1 sums each table row's tokens in one block in
// increasing token order in the accumulation type and adds them once, exactly as the CPU reference does, so the
// result is bitwise reproducible run to run and equal to the CPU's; v2 (scatter_plan.h) sums long runs in fixed
// pieces and combines them in a fixed order: reproducible run to run, equal to the CPU's up to the rounding of
// that order. Ids outside the table (bad input, checked on the CPU path) make the forward write NaN rows and are
// skipped by the backward.
#include <algorithm>

#include "kernels/bigram.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/embedding_variants.h"
#include "kernels/cuda/kernel_version_env.h"
#include "kernels/cuda/row_sort.cuh"
#include "kernels/cuda/scatter_plan.h"
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
                            int d, const T* __restrict__ sign, const int32_t* __restrict__ sign_ids, int64_t sign_rows,
                            T* __restrict__ out) {
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
                                    const T* __restrict__ sign, const int32_t* __restrict__ sign_ids, int64_t sign_rows,
                                    T* __restrict__ dtable) {
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

// v2 of the scatter (scatter_plan.h): one block per chunk of kScatterChunk sorted positions. v1's block per run
// walked its run serially, one dependent load latency per token, so the few runs of thousands of tokens (Zipf ids)
// held the whole grid; here a block's serial work is at most one chunk, read kScatterInFlight tokens at a time.
// The chunk's token offsets and steps go to shared memory first; then each thread walks the chunk for its columns,
// loading a group's dout (and sign) packs and the rows it completes before it adds them in order.
constexpr int kScatterInFlight = 4;

template <typename T, typename A, int VEC, bool kSigned>
__global__ void scatter_chunks_kernel(const T* __restrict__ dout, const int32_t* __restrict__ sorted_ids,
                                      const int32_t* __restrict__ token_order, int64_t n, int64_t rows, int d,
                                      const T* __restrict__ sign, const int32_t* __restrict__ sign_ids,
                                      int64_t sign_rows, T* __restrict__ dtable, A* __restrict__ partials) {
  using namespace scatter_plan;
  __shared__ int64_t dout_offset[kScatterChunk];    // token · d
  __shared__ int64_t sign_offset[kScatterChunk];    // sign row · d; -1: sign id outside the table, token skipped
  __shared__ int64_t target_offset[kScatterChunk];  // row · d (add_into_row) or slot · d (store_partial)
  __shared__ Action action[kScatterChunk];
  const int64_t chunks = chunk_count(n);
  for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    const int64_t begin = chunk * kScatterChunk;
    const int count = static_cast<int>(n - begin < kScatterChunk ? n - begin : kScatterChunk);
    __syncthreads();  // the previous chunk's reads of the shared arrays are done
    for (int i = threadIdx.x; i < count; i += blockDim.x) {
      const int64_t t = token_order[begin + i];
      dout_offset[i] = t * d;
      if constexpr (kSigned) {
        const int32_t sid = sign_ids[t];
        sign_offset[i] = sid >= 0 && sid < sign_rows ? static_cast<int64_t>(sid) * d : -1;
      }
      const Step step = step_at(sorted_ids, n, rows, begin + i);
      action[i] = step.action;
      target_offset[i] = step.target * d;
    }
    __syncthreads();
    for (int c = threadIdx.x * VEC; c < d; c += blockDim.x * VEC) {
      A acc[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[j] = A(0);
      for (int i0 = 0; i0 < count; i0 += kScatterInFlight) {
        Pack<T, VEC> g[kScatterInFlight], s[kScatterInFlight], cur[kScatterInFlight];
#pragma unroll
        for (int u = 0; u < kScatterInFlight; ++u) {
          const int i = i0 + u;
          if (i >= count) break;
          g[u] = load_pack<T, VEC>(dout + dout_offset[i] + c);
          if constexpr (kSigned) {
            if (sign_offset[i] >= 0) s[u] = load_pack<T, VEC>(sign + sign_offset[i] + c);
          }
          if (action[i] == Action::add_into_row) cur[u] = load_pack<T, VEC>(dtable + target_offset[i] + c);
        }
#pragma unroll
        for (int u = 0; u < kScatterInFlight; ++u) {
          const int i = i0 + u;
          if (i >= count) break;
          if constexpr (kSigned) {
            if (sign_offset[i] >= 0) {
#pragma unroll
              for (int j = 0; j < VEC; ++j) acc[j] += to_acc<A>(g[u].v[j]) * to_acc<A>(s[u].v[j]);
            }
          } else {
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc[j] += to_acc<A>(g[u].v[j]);
          }
          const Action a = action[i];
          if (a == Action::accumulate) continue;
          if (a == Action::add_into_row) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) cur[u].v[j] = from_acc<T>(to_acc<A>(cur[u].v[j]) + acc[j]);
            store_pack<T, VEC>(dtable + target_offset[i] + c, cur[u]);
          } else if (a == Action::store_partial) {
            Pack<A, VEC> p;
#pragma unroll
            for (int j = 0; j < VEC; ++j) p.v[j] = acc[j];
            store_pack<A, VEC>(partials + target_offset[i] + c, p);
          }
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[j] = A(0);
        }
      }
    }
  }
}

// The second kernel of v2: for each run that crosses a chunk boundary, the block of the chunk where it begins adds
// the run's partials in chunk order (its started slot, then the continued slots of the chunks it reaches) and adds
// the total into the row once. The chunks the run reaches are counted blockDim.x at a time, one chunk per thread.
constexpr int kCombineInFlight = 8;

template <typename T, typename A, int VEC>
__global__ void scatter_combine_kernel(const int32_t* __restrict__ sorted_ids, int64_t n, int64_t rows, int d,
                                       const A* __restrict__ partials, T* __restrict__ dtable) {
  using namespace scatter_plan;
  const int64_t chunks = chunk_count(n);
  for (int64_t chunk = blockIdx.x; chunk < chunks; chunk += gridDim.x) {
    if (!starts_crossing_run(sorted_ids, n, rows, chunk)) continue;  // the same answer for the whole block
    const int32_t row = sorted_ids[(chunk + 1) * kScatterChunk - 1];
    int64_t reached = 0;  // chunks after this one whose continued slot belongs to the run
    for (int64_t first = chunk + 1;; first += blockDim.x) {
      const int hits = __syncthreads_count(run_continues_into(sorted_ids, n, row, first + threadIdx.x));
      reached += hits;
      if (hits < static_cast<int>(blockDim.x)) break;
    }
    T* dst = dtable + static_cast<int64_t>(row) * d;
    for (int c = threadIdx.x * VEC; c < d; c += blockDim.x * VEC) {
      const Pack<A, VEC> started = load_pack<A, VEC>(partials + partial_slot(chunk, kSlotStarted) * d + c);
      A acc[VEC];
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc[j] = started.v[j];
      for (int64_t k0 = chunk + 1; k0 <= chunk + reached; k0 += kCombineInFlight) {
        Pack<A, VEC> p[kCombineInFlight];
#pragma unroll
        for (int u = 0; u < kCombineInFlight; ++u) {
          if (k0 + u > chunk + reached) break;
          p[u] = load_pack<A, VEC>(partials + partial_slot(k0 + u, kSlotContinued) * d + c);
        }
#pragma unroll
        for (int u = 0; u < kCombineInFlight; ++u) {
          if (k0 + u > chunk + reached) break;
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[j] += p[u].v[j];
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
      gather_rows_kernel<T, A, VEC, kSigned>
          <<<blocks_for(n, 1), threads_for(d, VEC)>>>(device_ptr<T>(table), device_ptr<int32_t>(ids), n, rows, d,
                                                      sign_ptr, sign_ids_ptr, sign_rows, device_ptr<T>(out));
    } else {
      const int64_t wave = int64_t{multiprocessor_count()} * (2048 / (kGatherWarps * 32));
      const auto blocks = static_cast<unsigned>(std::min<int64_t>(wave, (n + kGatherWarps - 1) / kGatherWarps));
      gather_rows_warp_kernel<T, A, VEC, kSigned>
          <<<blocks, kGatherWarps * 32>>>(device_ptr<T>(table), device_ptr<int32_t>(ids), n, rows, d, sign_ptr,
                                          sign_ids_ptr, sign_rows, device_ptr<T>(out));
    }
  });
  GPT_CUDA_CHECK_LAUNCH();
}

template <bool kSigned>
void scatter(const Tensor& dout, const Tensor* sign, const Tensor& ids, const Tensor* sign_ids, Tensor& dtable,
             const char* op, int version) {
  GPT_CHECK(version >= 1 && version <= kScatterVersions, op, ": no scatter version ", version, " (1 to ",
            kScatterVersions, ")");
  const int d = static_cast<int>(dtable.size(1));
  const int64_t n = ids.numel(), rows = dtable.size(0);
  if (n == 0) return;
  const TokensByRow groups = sort_tokens_by_row(device_ptr<int32_t>(ids), n, rows);
  const void* sign_base = kSigned ? sign->raw() : nullptr;
  dispatch_packed(dtable.dtype(), d, {dtable.raw(), dout.raw(), sign_base}, op, [&]<typename T, typename A, int VEC>() {
    const T* sign_ptr = kSigned ? device_ptr<T>(*sign) : nullptr;
    const int32_t* sign_ids_ptr = kSigned ? device_ptr<int32_t>(*sign_ids) : nullptr;
    const int64_t sign_rows = kSigned ? sign->size(0) : 0;
    if (version == 1) {
      scatter_rows_kernel<T, A, VEC, kSigned><<<blocks_for(n, 1), threads_for(d, VEC)>>>(
          device_ptr<T>(dout), groups.sorted_ids, groups.token_order, n, rows, d, sign_ptr, sign_ids_ptr, sign_rows,
          device_ptr<T>(dtable));
      return;
    }
    const int64_t chunks = scatter_plan::chunk_count(n);
    // Partials only where a run can cross a chunk boundary; allocated on the stream the kernels launch on.
    const DeviceScratch partials(
        chunks > 1 ? static_cast<size_t>(chunks) * scatter_plan::kSlotsPerChunk * d * sizeof(A) : 0,
        kLegacyDefaultStream);
    scatter_chunks_kernel<T, A, VEC, kSigned><<<blocks_for(chunks, 1), threads_for(d, VEC)>>>(
        device_ptr<T>(dout), groups.sorted_ids, groups.token_order, n, rows, d, sign_ptr, sign_ids_ptr, sign_rows,
        device_ptr<T>(dtable), partials.as<A>());
    if (chunks > 1) {
      GPT_CUDA_CHECK_LAUNCH();
      scatter_combine_kernel<T, A, VEC><<<blocks_for(chunks - 1, 1), threads_for(d, VEC)>>>(
          groups.sorted_ids, n, rows, d, partials.as<A>(), device_ptr<T>(dtable));
    }
  });
  GPT_CUDA_CHECK_LAUNCH();
}

// The scatter version the public ops run: SPEEDRUN_SCATTER_ROWS (read once per process) or kPromotedScatter.
int scatter_version() {
  static const int version = kernel_version_from_env("SPEEDRUN_SCATTER_ROWS", kPromotedScatter, kScatterVersions);
  return version;
}

}  // namespace

void embedding_forward_version(const Tensor& table, const Tensor& ids, Tensor& out, int version) {
  gather<false>(table, nullptr, ids, nullptr, out, "embedding_forward", version);
}

void embedding_forward(const Tensor& table, const Tensor& ids, Tensor& out) {
  embedding_forward_version(table, ids, out, kPromotedGather);
}

void embedding_backward_version(const Tensor& dout, const Tensor& ids, Tensor& dtable, int version) {
  scatter<false>(dout, nullptr, ids, nullptr, dtable, "embedding_backward", version);
}

void embedding_backward(const Tensor& dout, const Tensor& ids, Tensor& dtable) {
  embedding_backward_version(dout, ids, dtable, scatter_version());
}

void bigram_forward(const Tensor& embed, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids, Tensor& out) {
  gather<true>(embed, &sign, ids, &sign_ids, out, "bigram_forward", kPromotedGather);
}

void bigram_backward_version(const Tensor& dout, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids,
                             Tensor& dembed, int version) {
  scatter<true>(dout, &sign, ids, &sign_ids, dembed, "bigram_backward", version);
}

void bigram_backward(const Tensor& dout, const Tensor& sign, const Tensor& ids, const Tensor& sign_ids,
                     Tensor& dembed) {
  bigram_backward_version(dout, sign, ids, sign_ids, dembed, scatter_version());
}

}  // namespace gpt::cuda
