// CUDA implementation of kernels/gemm.h through cuBLASLt.
//
// Row-major mapping: a row-major [r, c] buffer is the column-major c×r matrix, so the row-major C = op(A)·op(B)
// is computed as the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: cuBLASLt's first operand is our B, its second our A, and
// each keeps its own transpose flag. The FP8 entry's layout (A [M, K], B [N, K]) is therefore cuBLASLt's "TN",
// the only one its FP8 kernels take.
//
// Per device: one handle, a 32 MiB workspace per stream (streams may run GEMMs concurrently), and a plan cache:
// descriptors, layouts and the algorithm are chosen once per distinct problem (shape, dtypes, batch strides,
// operand alignment) and reused by every later call.
//
// Autotuning: the heuristic's first answer ran at 0.78–0.93 of the cuBLASLt rates of docs/ANCHORS.md on the H200, so
// the first call of a new problem asks for up to 8 candidates and times each on the call's own operands (one warm-up,
// then the best of 3 event-timed runs) and keeps the fastest. The timed runs write C with beta = 0, so they run
// only when the call's beta is 0 (C is about to be overwritten anyway) and the stream is not being captured into a
// graph; otherwise the heuristic's first candidate is kept. SPEEDRUN_GEMM_AUTOTUNE=0 turns autotuning off.
// gemm_selection() (kernels/cuda/gemm_selection.h) describes the plan of the latest call for the benchmarks.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>
#include <bit>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "kernels/cuda/cublaslt.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_selection.h"
#include "kernels/cuda/runtime.h"
#include "kernels/gemm.h"

namespace gpt::cuda {

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kHeuristicCandidates = 8;

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::f64:
      return CUDA_R_64F;
    case DType::f32:
      return CUDA_R_32F;
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::e4m3:
      return CUDA_R_8F_E4M3;
    case DType::e5m2:
      return CUDA_R_8F_E5M2;
    default:
      GPT_FAIL("gemm: no cuBLASLt type for dtype ", dtype_name(dtype));
  }
}

// Largest power of two (≤ 256) dividing the address of every matrix of a strided batch.
uint32_t alignment_of(const void* ptr, int64_t stride_bytes) {
  uint64_t bits = reinterpret_cast<uintptr_t>(ptr) | 256u;
  if (stride_bytes != 0) bits |= static_cast<uint64_t>(stride_bytes);
  return static_cast<uint32_t>(std::min<uint64_t>(uint64_t{1} << std::countr_zero(bits), 256));
}

// Everything a plan depends on (not the pointers themselves, only their alignment; not alpha/beta).
struct PlanKey {
  int device = 0;
  DType a = DType::f32, b = DType::f32, c = DType::f32;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements; 0 = shared operand
  uint32_t align_a = 0, align_b = 0, align_c = 0;
  bool fp8 = false, fast_accum = false;
  auto operator<=>(const PlanKey&) const = default;
};

struct Plan {
  lt::MatmulDesc desc;
  lt::Layout first, second, out;  // cuBLASLt roles: first = our B, second = our A, out = C (= D)
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;  // usable heuristic answers, best guess first
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;
  bool tuned = false;     // candidates were timed (or there was nothing to choose)
  std::string selection;  // what was chosen and why, for gemm_selection()
};

thread_local std::string t_last_selection;

int algo_attribute(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  int value = 0;  // the attributes read here are 16- or 32-bit; zero-filled int covers both (little endian)
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &value, sizeof(value), &written) != CUBLAS_STATUS_SUCCESS) {
    return -1;
  }
  return value;
}

std::string describe_algo(const cublasLtMatmulAlgo_t& algo) {
  std::ostringstream os;
  os << "algo " << algo_attribute(algo, CUBLASLT_ALGO_CONFIG_ID) << " tile "
     << algo_attribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID) << " stages "
     << algo_attribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID) << " splitK "
     << algo_attribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM) << " cluster "
     << algo_attribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID);
  return os.str();
}

bool autotune_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("SPEEDRUN_GEMM_AUTOTUNE");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

class DeviceContext {
 public:
  DeviceContext() : handle_(lt::make_handle()) {}

  cublasLtHandle_t handle() const { return handle_.get(); }

  Plan& plan(const PlanKey& key) {
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, build_plan(key)).first;
    return *it->second;
  }

  void* workspace(cudaStream_t stream) {
    auto it = workspaces_.find(stream);
    if (it == workspaces_.end()) {
      it = workspaces_.emplace(stream, Tensor::empty({static_cast<int64_t>(kWorkspaceBytes)}, DType::u8, Device::cuda))
               .first;
    }
    return it->second.raw();
  }

  std::mutex& mutex() { return mutex_; }

 private:
  std::unique_ptr<Plan> build_plan(const PlanKey& key) const;

  lt::Handle handle_;
  std::map<PlanKey, std::unique_ptr<Plan>> plans_;
  std::map<cudaStream_t, Tensor> workspaces_;
  std::mutex mutex_;
};

std::unique_ptr<Plan> DeviceContext::build_plan(const PlanKey& key) const {
  auto plan = std::make_unique<Plan>();
  const bool f64 = key.a == DType::f64;
  plan->desc = lt::make_matmul_desc(f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F, f64 ? CUDA_R_64F : CUDA_R_32F);
  const cublasOperation_t op_first = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  lt::set(plan->desc.get(), CUBLASLT_MATMUL_DESC_TRANSA, op_first);
  lt::set(plan->desc.get(), CUBLASLT_MATMUL_DESC_TRANSB, op_second);
  if (key.fp8) lt::set(plan->desc.get(), CUBLASLT_MATMUL_DESC_FAST_ACCUM, static_cast<int8_t>(key.fast_accum));

  // Column-major shapes of the stored buffers: our B is N×K (or K×N when trans_b), our A is K×M (or M×K).
  const uint64_t first_rows = key.trans_b ? key.k : key.n, first_cols = key.trans_b ? key.n : key.k;
  const uint64_t second_rows = key.trans_a ? key.m : key.k, second_cols = key.trans_a ? key.k : key.m;
  plan->first = lt::make_layout(cuda_type(key.b), first_rows, first_cols, static_cast<int64_t>(first_rows));
  plan->second = lt::make_layout(cuda_type(key.a), second_rows, second_cols, static_cast<int64_t>(second_rows));
  plan->out = lt::make_layout(cuda_type(key.c), key.n, key.m, key.n);
  if (key.batch > 1) {
    const int32_t count = static_cast<int32_t>(key.batch);
    for (auto [layout, stride] :
         {std::pair{plan->first.get(), key.stride_b}, std::pair{plan->second.get(), key.stride_a},
          std::pair{plan->out.get(), key.stride_c}}) {
      lt::set(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count);
      lt::set(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
    }
  }

  lt::Preference pref = lt::make_preference();
  lt::set(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes));
  lt::set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b);
  lt::set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a);
  lt::set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c);
  lt::set(pref.get(), CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c);

  cublasLtMatmulHeuristicResult_t results[kHeuristicCandidates] = {};
  int found = 0;
  GPT_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_.get(), plan->desc.get(), plan->first.get(),
                                                  plan->second.get(), plan->out.get(), plan->out.get(), pref.get(),
                                                  kHeuristicCandidates, results, &found));
  const auto usable =
      std::find_if(results, results + found, [](const auto& r) { return r.state == CUBLAS_STATUS_SUCCESS; });
  GPT_CHECK(usable != results + found, "gemm: cuBLASLt has no algorithm for ", key.m, "x", key.n, "x", key.k, " batch ",
            key.batch, " (", dtype_name(key.a), "x", dtype_name(key.b), " -> ", dtype_name(key.c), ", trans_a ",
            key.trans_a, ", trans_b ", key.trans_b, ", alignments ", key.align_a, "/", key.align_b, "/", key.align_c,
            " bytes)");
  for (int i = 0; i < found; ++i) {
    if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= kWorkspaceBytes) {
      plan->candidates.push_back(results[i]);
    }
  }
  GPT_CHECK(!plan->candidates.empty(), "gemm: every cuBLASLt candidate needs more than ", kWorkspaceBytes,
            " bytes of workspace");
  plan->algo = plan->candidates.front().algo;
  plan->workspace_bytes = plan->candidates.front().workspaceSize;
  plan->tuned = plan->candidates.size() == 1;
  plan->selection = "heuristic #0 of " + std::to_string(found) + " (" + describe_algo(plan->algo) + ")";
  return plan;
}

DeviceContext& context_for_current_device(int& device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<DeviceContext>> contexts;
  GPT_CUDA_CHECK(cudaGetDevice(&device));
  const std::lock_guard lock(mutex);
  auto& ctx = contexts[device];
  if (!ctx) ctx = std::make_unique<DeviceContext>();
  return *ctx;
}

struct Operands {
  const void* a;
  const void* b;
  void* c;
  const float* scale_a = nullptr;  // FP8 only
  const float* scale_b = nullptr;
};

// Times every candidate of `plan` on the call's operands (beta must be 0: the runs overwrite C) and keeps the
// fastest. Skipped while the stream is being captured into a graph (nothing may synchronize then).
void autotune(DeviceContext& ctx, Plan& plan, const Operands& ops, const void* alpha_p, const void* beta_p) {
  const cudaStream_t stream = current_stream();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  GPT_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) return;
  void* workspace = ctx.workspace(stream);
  Event start(true), stop(true);
  float best_ms = 0, first_ms = 0;
  size_t best = 0;
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const auto& cand = plan.candidates[i];
    auto launch = [&] {
      return cublasLtMatmul(ctx.handle(), plan.desc.get(), alpha_p, ops.b, plan.first.get(), ops.a, plan.second.get(),
                            beta_p, ops.c, plan.out.get(), ops.c, plan.out.get(), &cand.algo, workspace,
                            cand.workspaceSize, stream);
    };
    if (launch() != CUBLAS_STATUS_SUCCESS) continue;  // a candidate that refuses to run is not a choice
    float ms = INFINITY;
    for (int rep = 0; rep < 3; ++rep) {
      start.record(stream);
      GPT_CUBLAS_CHECK(launch());
      stop.record(stream);
      stop.synchronize();
      ms = std::min(ms, Event::elapsed_ms(start, stop));
    }
    if (i == 0) first_ms = ms;
    if (best_ms == 0 || ms < best_ms) {
      best_ms = ms;
      best = i;
    }
  }
  GPT_CUDA_CHECK(cudaGetLastError());
  plan.algo = plan.candidates[best].algo;
  plan.workspace_bytes = plan.candidates[best].workspaceSize;
  plan.tuned = true;
  std::ostringstream os;
  os << "autotuned #" << best << " of " << plan.candidates.size() << " (" << describe_algo(plan.algo) << ", " << best_ms
     << " ms; heuristic #0 " << first_ms << " ms)";
  plan.selection = os.str();
}

void run(PlanKey key, const Operands& ops, double alpha, double beta) {
  if (key.m == 0 || key.n == 0 || key.batch == 0) return;
  GPT_CHECK(key.k > 0, "gemm: empty inner dimension (K = 0) is not supported on CUDA");
  int device = 0;
  DeviceContext& ctx = context_for_current_device(device);
  key.device = device;
  const size_t es_a = dtype_size(key.a), es_b = dtype_size(key.b), es_c = dtype_size(key.c);
  key.align_a = alignment_of(ops.a, key.stride_a * static_cast<int64_t>(es_a));
  key.align_b = alignment_of(ops.b, key.stride_b * static_cast<int64_t>(es_b));
  key.align_c = alignment_of(ops.c, key.stride_c * static_cast<int64_t>(es_c));

  const cudaStream_t stream = current_stream();
  const std::lock_guard lock(ctx.mutex());  // plans are shared and the FP8 scale pointers are set per call
  Plan& plan = ctx.plan(key);
  if (key.fp8) {
    lt::set(plan.desc.get(), CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, ops.scale_b);  // cuBLASLt's A is our B
    lt::set(plan.desc.get(), CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, ops.scale_a);
  }
  const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
  const bool f64 = key.a == DType::f64;
  const void* alpha_p = f64 ? static_cast<const void*>(&alpha) : &alpha_f;
  const void* beta_p = f64 ? static_cast<const void*>(&beta) : &beta_f;
  if (!plan.tuned && beta == 0.0 && autotune_enabled()) autotune(ctx, plan, ops, alpha_p, beta_p);
  void* workspace = plan.workspace_bytes > 0 ? ctx.workspace(stream) : nullptr;
  GPT_CUBLAS_CHECK(cublasLtMatmul(ctx.handle(), plan.desc.get(), alpha_p, ops.b, plan.first.get(), ops.a,
                                  plan.second.get(), beta_p, ops.c, plan.out.get(), ops.c, plan.out.get(), &plan.algo,
                                  workspace, plan.workspace_bytes, stream));
  t_last_selection = plan.selection;
}

}  // namespace

std::string gemm_selection() { return t_last_selection; }

void gemm(const Tensor& a, const Tensor& b, Tensor& c, const GemmArgs& args) {
  const GemmShape s = gemm_shape(a, b, c, args);
  GPT_CHECK(a.dtype() != DType::f32 || c.dtype() == DType::f32, "gemm: f32 operands need an f32 C, got ", c.describe());
  PlanKey key;
  key.a = a.dtype();
  key.b = b.dtype();
  key.c = c.dtype();
  key.trans_a = args.trans_a;
  key.trans_b = args.trans_b;
  key.m = s.m;
  key.n = s.n;
  key.k = s.k;
  key.batch = s.batch;
  key.stride_a = s.a_batched ? s.m * s.k : 0;
  key.stride_b = s.b_batched ? s.k * s.n : 0;
  key.stride_c = s.c_batched ? s.m * s.n : 0;
  run(key, {.a = a.raw(), .b = b.raw(), .c = c.raw()}, args.alpha, args.beta);
}

void gemm_fp8(const Tensor& a, const Tensor& b, Tensor& c, const Tensor& scale_a, const Tensor& scale_b,
              const Fp8GemmArgs& args) {
  for (const Tensor* scale : {&scale_a, &scale_b}) {
    GPT_CHECK(reinterpret_cast<uintptr_t>(scale->raw()) % 16 == 0, "gemm_fp8: scale tensor ", scale->describe(),
              " must be 16-byte aligned on CUDA (cuBLASLt refuses other FP8 scale pointers)");
  }
  PlanKey key;
  key.a = a.dtype();
  key.b = b.dtype();
  key.c = c.dtype();
  key.trans_a = false;
  key.trans_b = true;
  key.m = a.size(0);
  key.n = b.size(0);
  key.k = a.size(1);
  key.fp8 = true;
  key.fast_accum = args.fast_accum;
  run(key,
      {.a = a.raw(),
       .b = b.raw(),
       .c = c.raw(),
       .scale_a = static_cast<const float*>(scale_a.raw()),
       .scale_b = static_cast<const float*>(scale_b.raw())},
      args.alpha, args.beta);
}

}  // namespace gpt::cuda
