// Google Benchmark cases for the CUDA memory-bound ops (embedding, mix, activations, QK-norm + rotary, softcap loss,
// fp8, transpose).
// Each iteration is timed with CUDA events (manual time); the GB/s counter counts the fewest bytes the op must move
// (each input read once, each output written once), so it compares directly with the device's copy bandwidth.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/bench/bench_util.cuh"
#include "kernels/bench/zipf_ids.h"
#include "kernels/bigram.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/embedding_variants.h"
#include "kernels/cuda/fp8_variants.h"
#include "kernels/cuda/mix_variants.h"
#include "kernels/cuda/softcap_loss_variants.h"
#include "kernels/elementwise.h"
#include "kernels/embedding.h"
#include "kernels/fp8.h"
#include "kernels/qk_norm_rotary.h"
#include "kernels/softcap_loss.h"
#include "kernels/transpose.h"

namespace gpt {
namespace {

Tensor random_device(const Shape& shape, DType dtype, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (double& x : v) x = dist(rng);
  return Tensor::from_doubles(v, shape, dtype, Device::cuda);
}

Tensor random_ids_device(int64_t n, int64_t hi, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> dist(0, hi - 1);
  Tensor t = Tensor::empty({n}, dtype);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::i32) {
      t.data<int32_t>()[i] = static_cast<int32_t>(dist(rng));
    } else {
      t.data<int64_t>()[i] = dist(rng);
    }
  }
  return t.to(Device::cuda);
}

constexpr int64_t kTokens = 16384, kDim = 768, kVocab = 50304, kLossRows = 49152 / 8;
constexpr int64_t kMicrobatchTokens = 49152;  // one stage-2 microbatch on one GPU

// One microbatch's token-embedding gather (49,152 rows of the 50,304 × 768 table). Arg: gather version
// (kernels/cuda/embedding_variants.h).
void BM_EmbeddingForward(benchmark::State& state) {
  const Tensor table = random_device({kVocab, kDim}, DType::bf16, 1);
  const Tensor ids = random_ids_device(kMicrobatchTokens, kVocab, DType::i32, 2);
  Tensor out = Tensor::empty({kMicrobatchTokens, kDim}, DType::bf16, Device::cuda);
  const int version = static_cast<int>(state.range(0));
  state.SetLabel("v" + std::to_string(version));
  bench::time_bytes_with_events(
      state, [&] { cuda::embedding_forward_version(table, ids, out, version); }, 2.0 * kMicrobatchTokens * kDim * 2);
}

void BM_EmbeddingBackward(benchmark::State& state) {
  const Tensor dout = random_device({kTokens, kDim}, DType::bf16, 3);
  const Tensor ids = random_ids_device(kTokens, kVocab, DType::i32, 4);
  Tensor dtable = Tensor::zeros({kVocab, kDim}, DType::bf16, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { embedding_backward(dout, ids, dtable); }, 3.0 * kTokens * kDim * 2);
}

// One microbatch's scatter-add backward (49,152 tokens, d = 768, bf16) through scatter version 1 or 2
// (kernels/cuda/embedding_variants.h), the id sort included. Args: version; table 0 = token embedding (50,304 rows),
// 1 = value embeddings (251,520 rows), 2 = bigram (377,280 rows, with the sign product of bigram_backward); ids 0 =
// uniform, 1 = Zipf (natural text: a few ids thousands of times, the case v1 serialises). Bytes: what the op must
// move: dout and the ids read once, each row hit read and written once, and for the bigram the sign ids and each
// sign row hit read once.
void BM_ScatterRows(benchmark::State& state) {
  const int version = static_cast<int>(state.range(0));
  const int64_t table = state.range(1), rows = table == 0 ? kVocab : table == 1 ? 5 * kVocab : 377280;
  const bool zipf = state.range(2) == 1, signed_rows = table == 2;
  constexpr int64_t kSignRows = 8192;
  std::vector<int32_t> ids = zipf_ids(kMicrobatchTokens, rows, 41), sign_ids(kMicrobatchTokens);
  std::mt19937_64 rng(42);
  if (!zipf) {
    std::uniform_int_distribution<int32_t> uniform(0, static_cast<int32_t>(rows - 1));
    for (int32_t& id : ids) id = uniform(rng);
  }
  std::uniform_int_distribution<int32_t> uniform_sign(0, kSignRows - 1);
  for (int32_t& sid : sign_ids) sid = uniform_sign(rng);
  const auto device_ids = [](const std::vector<int32_t>& v) {
    Tensor t = Tensor::empty({static_cast<int64_t>(v.size())}, DType::i32);
    std::copy(v.begin(), v.end(), t.data<int32_t>());
    return t.to(Device::cuda);
  };
  const Tensor ids_d = device_ids(ids), sign_ids_d = device_ids(sign_ids);
  const Tensor dout = random_device({kMicrobatchTokens, kDim}, DType::bf16, 43);
  const Tensor sign = random_device({kSignRows, kDim}, DType::bf16, 44);  // not ±1: values do not change the time
  Tensor dtable = Tensor::zeros({rows, kDim}, DType::bf16, Device::cuda);
  const auto hit_rows = static_cast<double>(std::set<int32_t>(ids.begin(), ids.end()).size());
  const auto hit_signs = static_cast<double>(std::set<int32_t>(sign_ids.begin(), sign_ids.end()).size());
  const double row_bytes = kDim * 2.0;
  double bytes = kMicrobatchTokens * (row_bytes + 4) + 2 * hit_rows * row_bytes;
  if (signed_rows) bytes += kMicrobatchTokens * 4.0 + hit_signs * row_bytes;
  state.SetLabel("v" + std::to_string(version) + (version == cuda::kPromotedScatter ? " promoted" : " superseded") +
                 (zipf ? ", Zipf ids" : ", uniform ids") + ", " + std::to_string(static_cast<int64_t>(hit_rows)) +
                 " rows hit");
  state.counters["MB"] = bytes / 1e6;
  bench::time_bytes_with_events(
      state,
      [&] {
        if (signed_rows) {
          cuda::bigram_backward_version(dout, sign, ids_d, sign_ids_d, dtable, version);
        } else {
          cuda::embedding_backward_version(dout, ids_d, dtable, version);
        }
      },
      bytes);
}

void BM_MixForward3(benchmark::State& state) {
  const Tensor x0 = random_device({kTokens, kDim}, DType::bf16, 5), x1 = random_device({kTokens, kDim}, DType::bf16, 6);
  const Tensor x2 = random_device({kTokens, kDim}, DType::bf16, 7);
  const Tensor s = random_device({1}, DType::f32, 8), lanes = random_device({kTokens, 32}, DType::bf16, 9);
  const std::vector<MixTerm> terms{{x0, Coef::of_scalar(s)},
                                   {x1, Coef::sigmoid_scalar(s).times_lane(lanes, 3)},
                                   {x2, Coef::of_lane(lanes, 10, 6).plus(1.0f)}};
  Tensor out = Tensor::empty({kTokens, kDim}, DType::bf16, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { mix_forward(terms, out); }, 4.0 * kTokens * kDim * 2);
}

// The layer loop's four-term residual mix backward at one microbatch (49,152 rows): ρ·x0, σ(λ)·G[:, 3]·x1 and
// (1 + G[:, 10 + head])·x2 accumulate into dx0…dx2 with their scalar and lane gradients, x3's gradient overwrites
// dout in place. Bytes: dout and x0…x2 read, dx0…dx2 read and written, dout written (11 passes of [rows, 768]).
// Argument: kernel version (kernels/cuda/mix_variants.h).
void BM_MixBackward4(benchmark::State& state) {
  const int version = static_cast<int>(state.range(0));
  constexpr int64_t kRows = 49152;
  Tensor x[4], dx[3];
  for (int k = 0; k < 4; ++k) x[k] = random_device({kRows, kDim}, DType::bf16, 30 + k);
  for (int k = 0; k < 3; ++k) dx[k] = random_device({kRows, kDim}, DType::bf16, 40 + k);
  const Tensor rho = random_device({1}, DType::f32, 34), lambda = random_device({1}, DType::f32, 35);
  const Tensor lanes = random_device({kRows, 32}, DType::bf16, 36);
  Tensor dout = random_device({kRows, kDim}, DType::bf16, 37);
  Tensor drho = Tensor::zeros({1}, DType::f32, Device::cuda), dlambda = Tensor::zeros({1}, DType::f32, Device::cuda);
  Tensor dlanes = Tensor::zeros({kRows, 32}, DType::bf16, Device::cuda);
  const std::vector<MixTerm> terms{{x[0], Coef::of_scalar(rho)},
                                   {x[1], Coef::sigmoid_scalar(lambda).times_lane(lanes, 3)},
                                   {x[2], Coef::of_lane(lanes, 10, 6).plus(1.0f)},
                                   {x[3], Coef::one()}};
  const std::vector<MixGrad> grads{MixGrad{.dx = dx[0], .dscalar = drho},
                                   MixGrad{.dx = dx[1], .dscalar = dlambda, .dlanes = dlanes},
                                   MixGrad{.dx = dx[2], .dlanes = dlanes}, MixGrad{.dx = dout, .overwrite_dx = true}};
  bench::time_bytes_with_events(
      state, [&] { cuda::mix_backward_version(dout, terms, grads, version); }, 11.0 * kRows * kDim * 2);
  state.SetLabel(version == cuda::kPromotedMixBackward ? "promoted" : "");
}

// The layer loop's residual mix at one stage-2 microbatch (49,152 rows, §2.8): ρ·x + π·a + G[:, 18]·x0 +
// G[:, 19]·Bg, every coefficient one number per row (the calls mix_forward v2 and mix_backward v3/v4 take).
// Forward bytes: four inputs read, out written. Backward: dout and the four x read (coefficient gradients), dx of x
// and a overwritten, dx of x0 and Bg read and written (x0's and Bg's gradients gather over layers): 11 passes.
// Argument: kernel version (kernels/cuda/mix_variants.h).
// The [rows, 768] tensors are filled on the GPU: Google Benchmark runs a benchmark's body several times while it
// settles the iteration count, and host-drawn normals for nine of them took tens of seconds per run.
struct ResidualMix {
  static constexpr int64_t kRows = 49152;
  Tensor x[4], dx[4], rho, pi, lanes, drho, dpi, dlanes, dout;
  static Tensor filled(const Shape& shape, uint64_t seed) {
    Tensor t = Tensor::empty(shape, DType::bf16, Device::cuda);
    bench::fill_uniform(t, seed);
    return t;
  }
  ResidualMix() {
    for (int k = 0; k < 4; ++k) {
      x[k] = filled({kRows, kDim}, 60 + k);
      dx[k] = filled({kRows, kDim}, 70 + k);
    }
    rho = random_device({1}, DType::f32, 64);
    pi = random_device({1}, DType::f32, 65);
    lanes = filled({kRows, 28}, 66);
    drho = Tensor::zeros({1}, DType::f32, Device::cuda);
    dpi = Tensor::zeros({1}, DType::f32, Device::cuda);
    dlanes = Tensor::zeros({kRows, 28}, DType::bf16, Device::cuda);
    dout = filled({kRows, kDim}, 67);
  }
  std::vector<MixTerm> terms() const {
    return {{x[0], Coef::of_scalar(rho)},
            {x[1], Coef::of_scalar(pi)},
            {x[2], Coef::of_lane(lanes, 18)},
            {x[3], Coef::of_lane(lanes, 19)}};
  }
  std::vector<MixGrad> grads() const {
    return {MixGrad{.dx = dx[0], .overwrite_dx = true, .dscalar = drho},
            MixGrad{.dx = dx[1], .overwrite_dx = true, .dscalar = dpi}, MixGrad{.dx = dx[2], .dlanes = dlanes},
            MixGrad{.dx = dx[3], .dlanes = dlanes}};
  }
};

void BM_MixForwardResidual(benchmark::State& state) {
  const int version = static_cast<int>(state.range(0));
  const ResidualMix m;
  const std::vector<MixTerm> terms = m.terms();
  Tensor out = Tensor::empty({ResidualMix::kRows, kDim}, DType::bf16, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { cuda::mix_forward_version(terms, out, version); }, 5.0 * ResidualMix::kRows * kDim * 2);
  state.SetLabel(version == cuda::kPromotedMixForward ? "promoted" : "");
}

void BM_MixBackwardResidual(benchmark::State& state) {
  const int version = static_cast<int>(state.range(0));
  const ResidualMix m;
  const std::vector<MixTerm> terms = m.terms();
  const std::vector<MixGrad> grads = m.grads();
  bench::time_bytes_with_events(
      state, [&] { cuda::mix_backward_version(m.dout, terms, grads, version); }, 11.0 * ResidualMix::kRows * kDim * 2);
  state.SetLabel(version == cuda::kPromotedMixBackward ? "promoted" : "");
}

void BM_ReluSquareForward(benchmark::State& state) {
  const Tensor pre = random_device({kTokens, 4 * kDim}, DType::bf16, 10);
  Tensor post = Tensor::empty(pre.shape(), DType::bf16, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { relu_square_forward(pre, post); }, 2.0 * pre.numel() * 2);
}

void BM_GeluBackward(benchmark::State& state) {
  const Tensor x = random_device({kTokens, kDim}, DType::bf16, 11),
               dy = random_device({kTokens, kDim}, DType::bf16, 12);
  Tensor dx = Tensor::zeros(x.shape(), DType::bf16, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { gelu_backward(dy, x, dx); }, 4.0 * x.numel() * 2);
}

void BM_BiasBackward(benchmark::State& state) {
  const Tensor dy = random_device({kTokens, kDim}, DType::bf16, 13);
  Tensor db = Tensor::zeros({kDim}, DType::bf16, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { bias_backward(dy, db); }, 1.0 * dy.numel() * 2);
}

// §3 training loss on one microbatch of 49152/8 positions: read z_raw once, write dz_raw once. Arguments: e5m2
// output (0/1), kernel version (1 or 2, kernels/cuda/softcap_loss_variants.h; the public op runs v2 here).
void BM_SoftcapTrainLoss(benchmark::State& state) {
  const bool e5m2 = state.range(0) != 0;
  const int64_t version = state.range(1);
  const Tensor z = random_device({kLossRows, kVocab}, DType::bf16, 14, 8.0);
  const Tensor y = random_ids_device(kLossRows, kVocab, DType::i64, 15);
  Tensor loss = Tensor::empty({1}, DType::f32, Device::cuda);
  Tensor dz = Tensor::empty({kLossRows, kVocab}, e5m2 ? DType::e5m2 : DType::bf16, Device::cuda);
  TrainLossConfig cfg{.mtp_weights = {1.0f, 0.5f, 0.25f}, .loss_scale = 1.0f / 8, .grad_scale = 0.75f / 448 / 8};
  const double bytes = static_cast<double>(kLossRows) * kVocab * (2 + (e5m2 ? 1 : 2));
  const auto run = version == 1 ? cuda::softcap_train_loss_v1 : cuda::softcap_train_loss_v2;
  state.SetLabel(std::string(version == 1 ? "v1" : "v2") + (e5m2 ? " e5m2" : " bf16"));
  bench::time_bytes_with_events(
      state, [&] { run(z, y, Tensor{}, cfg, loss, dz); }, bytes);
}

void BM_ValidationLossRows(benchmark::State& state) {
  const Tensor z = random_device({kLossRows, kVocab}, DType::bf16, 16, 8.0);
  const Tensor y = random_ids_device(kLossRows, kVocab, DType::i64, 17);
  Tensor sum = Tensor::zeros({1}, DType::f32, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { validation_loss_rows_add(z, y, sum); }, static_cast<double>(kLossRows) * kVocab * 2);
}

void BM_QuantizeE4m3(benchmark::State& state) {
  const Tensor x = random_device({kTokens, 4 * kDim}, DType::bf16, 18);
  const Tensor scale = Tensor::from_floats(std::vector<float>{0.01f}, {1}, DType::f32, Device::cuda);
  Tensor q = Tensor::empty(x.shape(), DType::e4m3, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { quantize_fp8(x, scale, q); }, 3.0 * x.numel());
}

void BM_Amax(benchmark::State& state) {
  const Tensor x = random_device({kTokens, 4 * kDim}, DType::bf16, 19);
  Tensor m = Tensor::empty({1}, DType::f32, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { amax(x, m); }, 2.0 * x.numel());
}

// The fused §7.2 activation at one microbatch's MLP shape (49,152 × 3,072): pre read, post and post8 written.
// Arg: kernel version (kernels/cuda/fp8_variants.h).
void BM_ReluSquareQuantize(benchmark::State& state) {
  const Tensor pre = random_device({kMicrobatchTokens, 4 * kDim}, DType::bf16, 20);
  const Tensor scale = Tensor::from_floats(std::vector<float>{0.5f}, {1}, DType::f32, Device::cuda);
  Tensor post = Tensor::empty(pre.shape(), DType::bf16, Device::cuda);
  Tensor q = Tensor::empty(pre.shape(), DType::e4m3, Device::cuda);
  Tensor m = Tensor::empty({1}, DType::f32, Device::cuda);
  const auto run = state.range(0) == 1 ? cuda::relu_square_quantize_fp8_v1 : cuda::relu_square_quantize_fp8_v2;
  state.SetLabel(state.range(0) == 1 ? "v1" : "v2");
  bench::time_bytes_with_events(
      state, [&] { run(pre, scale, post, q, m); }, 5.0 * pre.numel());
}

// The MLP backward's relu² step at 49,152 × 3,072. Arg 0: dpre zeroed then added into (what the MLP backward did:
// the bytes count the zero fill and the read-back); arg 1: written over dpost in place (GradWrite::overwrite).
void BM_ReluSquareBackward(benchmark::State& state) {
  const bool overwrite = state.range(0) == 1;
  const Tensor post = random_device({kMicrobatchTokens, 4 * kDim}, DType::bf16, 24);
  Tensor dpost = random_device(post.shape(), DType::bf16, 25);
  Tensor dpre = Tensor::empty(post.shape(), DType::bf16, Device::cuda);
  state.SetLabel(overwrite ? "overwrite in place" : "zero + add");
  bench::time_bytes_with_events(
      state,
      [&] {
        if (overwrite) {
          relu_square_backward(dpost, post, dpost, GradWrite::overwrite);
        } else {
          GPT_CUDA_CHECK(cudaMemsetAsync(dpre.raw(), 0, dpre.nbytes()));
          relu_square_backward(dpost, post, dpre);
        }
      },
      (overwrite ? 3.0 : 5.0) * post.numel() * 2);
}

// QK-norm + rotary on one microbatch's q (49,152 × 6 × 128, paired layout). Args: fused (0: rmsnorm then rotary
// through an intermediate, as the model ran them before kernels/qk_norm_rotary.h; 1: the fused op), backward (0/1;
// the unfused backward zeroes and adds into the intermediate gradient as the model did). Bytes: the fused op's floor
// (forward x read, y written; backward dy, x, dx read, dx written), so the two rows' GB/s compare like their times.
void BM_QkNormRotary(benchmark::State& state) {
  const bool fused = state.range(0) == 1, backward = state.range(1) == 1;
  const Shape shape{kMicrobatchTokens, 6, 128};
  RotaryTables tables(128, 2 * kMicrobatchTokens);
  const Tensor cos = tables.cos_table(DType::bf16, Device::cuda), sin = tables.sin_table(DType::bf16, Device::cuda);
  const RotaryLayout layout = RotaryLayout::paired;
  const Tensor x = random_device(shape, DType::bf16, 26, 3.0), dy = random_device(shape, DType::bf16, 27);
  Tensor y = Tensor::empty(shape, DType::bf16, Device::cuda), mid = Tensor::empty(shape, DType::bf16, Device::cuda);
  Tensor dx = Tensor::zeros(shape, DType::bf16, Device::cuda);
  Tensor rstd = Tensor::empty({kMicrobatchTokens * 6}, DType::f32, Device::cuda);
  qk_norm_rotary_forward(x, cos, sin, layout, y, rstd);
  state.SetLabel(std::string(fused ? "fused" : "rmsnorm + rotary") + (backward ? " backward" : " forward"));
  bench::time_bytes_with_events(
      state,
      [&] {
        if (!backward && fused) qk_norm_rotary_forward(x, cos, sin, layout, y, rstd);
        if (!backward && !fused) {
          rmsnorm_forward(x, mid, rstd);
          rotary_forward(mid, cos, sin, layout, y);
        }
        if (backward && fused) qk_norm_rotary_backward(dy, x, rstd, cos, sin, layout, dx);
        if (backward && !fused) {
          GPT_CUDA_CHECK(cudaMemsetAsync(mid.raw(), 0, mid.nbytes()));
          rotary_backward(dy, cos, sin, layout, mid);
          rmsnorm_backward(mid, x, rstd, dx);
        }
      },
      (backward ? 4.0 : 2.0) * x.numel() * 2);
}

// The three §7.1 lm_head products through the op (byte transposes included) at one microbatch's rows / 8:
// 0 = forward z = x8·w8 (fast accumulation), 1 = dh += g8·w8ᵀ, 2 = dlm_head += x8ᵀ·g8.
void BM_Fp8GemmLmHead(benchmark::State& state) {
  const int product = static_cast<int>(state.range(0));
  const Tensor sx = Tensor::from_floats(std::vector<float>{100.0f / 448}, {1}, DType::f32, Device::cuda);
  const Tensor sw = Tensor::from_floats(std::vector<float>{1.6f / 448}, {1}, DType::f32, Device::cuda);
  Tensor x8 = Tensor::empty({kLossRows, kDim}, DType::e4m3, Device::cuda);
  Tensor w8 = Tensor::empty({kDim, kVocab}, DType::e4m3, Device::cuda);
  Tensor g8 = Tensor::empty({kLossRows, kVocab}, DType::e5m2, Device::cuda);
  quantize_fp8(random_device({kLossRows, kDim}, DType::bf16, 21), sx, x8);
  quantize_fp8(random_device({kDim, kVocab}, DType::bf16, 22, 0.01), sw, w8);
  quantize_fp8(random_device({kLossRows, kVocab}, DType::bf16, 23, 1e-3), sw, g8);
  Tensor z = Tensor::empty({kLossRows, kVocab}, DType::bf16, Device::cuda);
  Tensor dh = Tensor::zeros({kLossRows, kDim}, DType::bf16, Device::cuda);
  Tensor dw = Tensor::zeros({kDim, kVocab}, DType::bf16, Device::cuda);
  const double bytes = product == 0   ? kLossRows * kDim + kDim * kVocab + 2.0 * kLossRows * kVocab
                       : product == 1 ? kLossRows * kVocab + kDim * kVocab + 4.0 * kLossRows * kDim
                                      : kLossRows * kDim + kLossRows * kVocab + 4.0 * kDim * kVocab;
  bench::time_bytes_with_events(
      state,
      [&] {
        if (product == 0) fp8_gemm(x8, w8, sx, sw, z, {}, Fp8Accumulation::fast);
        if (product == 1) fp8_gemm(g8, w8, sw, sw, dh, {.trans_b = true, .beta = 1.0f});
        if (product == 2) fp8_gemm(x8, g8, sx, sw, dw, {.trans_a = true, .beta = 1.0f});
      },
      bytes);
  state.counters["TFLOP/s"] =
      benchmark::Counter(2.0 * kLossRows * kDim * kVocab * state.iterations() / 1e12, benchmark::Counter::kIsRate);
}

// The byte transpose of one microbatch's lm_head gradient G8 (49,152 × 50,304 e5m2) that the weight-gradient FP8
// GEMM needs. Arg: version (kernels/cuda/fp8_variants.h).
void BM_Fp8Transpose(benchmark::State& state) {
  Tensor g8 = Tensor::empty({kMicrobatchTokens, kVocab}, DType::e5m2, Device::cuda);
  GPT_CUDA_CHECK(cudaMemset(g8.raw(), 0x3C, g8.nbytes()));
  const int version = static_cast<int>(state.range(0));
  state.SetLabel("v" + std::to_string(version));
  bench::time_bytes_with_events(
      state, [&] { benchmark::DoNotOptimize(cuda::transpose_fp8_bytes(g8, version)); }, 2.0 * g8.numel());
}

void BM_AddTransposed(benchmark::State& state) {
  const Tensor src = random_device({kVocab, kDim}, DType::bf16, 20);
  Tensor dst = Tensor::zeros({kDim, kVocab}, DType::bf16, Device::cuda);
  bench::time_bytes_with_events(
      state, [&] { add_transposed(src, dst); }, 3.0 * src.numel() * 2);
}

BENCHMARK(BM_EmbeddingForward)->ArgName("version")->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EmbeddingBackward)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ScatterRows)
    ->ArgsProduct({{1, 2}, {0, 1, 2}, {1, 0}})
    ->ArgNames({"version", "table", "zipf"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MixForward3)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MixBackward4)->ArgName("version")->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MixForwardResidual)->ArgName("version")->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_MixBackwardResidual)
    ->ArgName("version")
    ->Arg(1)
    ->Arg(3)
    ->Arg(4)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReluSquareForward)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GeluBackward)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_BiasBackward)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SoftcapTrainLoss)
    ->ArgsProduct({{0, 1}, {1, 2}})
    ->ArgNames({"e5m2", "version"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ValidationLossRows)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantizeE4m3)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Amax)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReluSquareQuantize)->ArgName("version")->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReluSquareBackward)->ArgName("overwrite")->Arg(0)->Arg(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QkNormRotary)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->ArgNames({"fused", "backward"})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Fp8GemmLmHead)->Arg(0)->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Fp8Transpose)->ArgName("version")->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AddTransposed)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace gpt

BENCHMARK_MAIN();
