// CUDA mix_forward / mix_backward (scalar, sigmoid-scalar, lane, grouped-lane and offset coefficients) and
// scale_weight against the CPU reference.
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/mix_variants.h"
#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using testing::random_tensor;

struct MixCase {
  DType dtype;
  int64_t rows, n;
};

class MixCuda : public ::testing::TestWithParam<MixCase> {};

// Builds the same four terms on one device: ρ·x0, σ(λ)·G[:, 3]·x1, (1 + G[:, 5 + head])·x2 (6 groups), x3.
struct MixSetup {
  Tensor x[4], rho, lam, lanes;
  std::vector<MixTerm> terms() const {
    return {MixTerm{x[0], Coef::of_scalar(rho)}, MixTerm{x[1], Coef::sigmoid_scalar(lam).times_lane(lanes, 3)},
            MixTerm{x[2], Coef::of_lane(lanes, 5, 6).plus(1.0f)}, MixTerm{x[3], Coef::one()}};
  }
  MixSetup on_gpu() const {
    MixSetup g;
    for (int k = 0; k < 4; ++k) g.x[k] = gpu(x[k]);
    g.rho = gpu(rho);
    g.lam = gpu(lam);
    g.lanes = gpu(lanes);
    return g;
  }
};

MixSetup make_setup(DType dtype, int64_t rows, int64_t n, uint64_t seed) {
  MixSetup s;
  for (int k = 0; k < 4; ++k) s.x[k] = random_tensor({rows, n}, dtype, seed + k);
  const DType sd = stat_dtype(dtype);
  s.rho = scalar_tensor(0.8125, sd);
  s.lam = scalar_tensor(-0.37, sd);
  s.lanes = random_tensor({rows, 12}, dtype, seed + 9);
  return s;
}

TEST_P(MixCuda, ForwardMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  const MixSetup cpu = make_setup(dtype, rows, n, 100);
  const MixSetup dev = cpu.on_gpu();
  Tensor out_cpu = Tensor::empty({rows, n}, dtype), out_gpu = Tensor::empty({rows, n}, dtype, Device::cuda);
  poison(out_gpu);
  const auto tc = cpu.terms(), tg = dev.terms();
  mix_forward(tc, out_cpu);
  mix_forward(tg, out_gpu);
  EXPECT_LT(rel_error(out_gpu, out_cpu), tolerance_for(dtype));
}

TEST_P(MixCuda, InPlaceForwardMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  MixSetup cpu = make_setup(dtype, rows, n, 200);
  MixSetup dev = cpu.on_gpu();
  const auto tc = cpu.terms(), tg = dev.terms();
  mix_forward(tc, cpu.x[0]);  // out aliases x0
  mix_forward(tg, dev.x[0]);
  EXPECT_LT(rel_error(dev.x[0], cpu.x[0]), tolerance_for(dtype));
}

// Every version of kernels/cuda/mix_variants.h (v2 takes the packed bf16 rows of 768 and the f32 rows of 384, v1
// the rest) from the same start values.
TEST_P(MixCuda, BackwardMatchesCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, n] = GetParam();
  const MixSetup cpu = make_setup(dtype, rows, n, 300);
  const MixSetup dev = cpu.on_gpu();
  const DType sd = stat_dtype(dtype);
  const Tensor dout_start = random_tensor({rows, n}, dtype, 310);
  Tensor dx_start[3];
  for (int k = 0; k < 3; ++k) dx_start[k] = random_tensor({rows, n}, dtype, 320 + k);
  const Tensor dl_start = random_tensor({rows, 12}, dtype, 330);
  // Term 3 overwrites the dout tensor itself (the in-place residual gradient).
  auto grads = [](Tensor* dx, Tensor& drho, Tensor& dlam, Tensor& dl, Tensor& dout) {
    return std::vector<MixGrad>{MixGrad{.dx = dx[0], .dscalar = drho},
                                MixGrad{.dx = dx[1], .dscalar = dlam, .dlanes = dl}, MixGrad{.dx = dx[2], .dlanes = dl},
                                MixGrad{.dx = dout, .overwrite_dx = true}};
  };
  Tensor dout_cpu = dout_start.clone(), dl_cpu = dl_start.clone();
  Tensor dx_cpu[3] = {dx_start[0].clone(), dx_start[1].clone(), dx_start[2].clone()};
  Tensor drho_cpu = scalar_tensor(0.25, sd), dlam_cpu = scalar_tensor(-0.5, sd);
  const auto tc = cpu.terms(), tg = dev.terms();
  mix_backward(dout_cpu, tc, grads(dx_cpu, drho_cpu, dlam_cpu, dl_cpu, dout_cpu));  // dout is term 3's dx too
  for (int version = 1; version <= cuda::kMixBackwardVersions; ++version) {
    SCOPED_TRACE("version " + std::to_string(version));
    Tensor dout_gpu = gpu(dout_start), dl_gpu = gpu(dl_start);
    Tensor dx_gpu[3] = {gpu(dx_start[0]), gpu(dx_start[1]), gpu(dx_start[2])};
    Tensor drho_gpu = gpu(scalar_tensor(0.25, sd)), dlam_gpu = gpu(scalar_tensor(-0.5, sd));
    cuda::mix_backward_version(dout_gpu, tg, grads(dx_gpu, drho_gpu, dlam_gpu, dl_gpu, dout_gpu), version);
    const double tol = tolerance_for(dtype);
    for (int k = 0; k < 3; ++k) EXPECT_LT(rel_error(dx_gpu[k], dx_cpu[k]), tol) << "dx" << k;
    EXPECT_LT(rel_error(dout_gpu, dout_cpu), tol) << "in-place dx of term 3";
    EXPECT_LT(rel_error(dl_gpu, dl_cpu), tol);
    // Scalar gradients are sums over rows·n products; bf16 inputs but fp32/double sums.
    const double stol = dtype == DType::f64 ? 1e-12 : 1e-4;
    EXPECT_LT(rel_error(drho_gpu, drho_cpu), stol);
    EXPECT_LT(rel_error(dlam_gpu, dlam_cpu), stol);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MixCuda,
                         ::testing::Values(MixCase{DType::f64, 37, 42}, MixCase{DType::f32, 37, 42},
                                           MixCase{DType::bf16, 37, 42}, MixCase{DType::bf16, 5, 18},
                                           MixCase{DType::f32, 2048, 768}, MixCase{DType::f32, 1000, 384},
                                           MixCase{DType::bf16, 16384, 768}));

// The one-pass versions (mix_forward v2, mix_backward v3/v4) on the calls they take: the layer loop's residual
// mixes (§2.8: ρ·x + π·a + G[:, g0]·x0 + G[:, gb]·Bg, and the two-term MLP mix), the λ·W scaling (one term) and five
// terms; each must equal v1 bit for bit (same coefficients, same order of every sum), here over rows that are not a
// multiple of the block's eight warps.
struct RowMixCase {
  const char* name;
  int terms;
};

class MixRowVersionsCuda : public ::testing::TestWithParam<RowMixCase> {};

struct RowMixSetup {
  std::vector<Tensor> x;
  Tensor rho, pi, lanes;
  std::vector<MixTerm> terms() const { return residual_mix_terms(x, rho, pi, lanes); }
};

constexpr int64_t kRowMixRows = 4099, kRowMixWidth = 768;

RowMixSetup row_mix_setup(int terms, uint64_t seed) {
  RowMixSetup s;
  for (int k = 0; k < terms; ++k) s.x.push_back(gpu(random_tensor({kRowMixRows, kRowMixWidth}, DType::bf16, seed + k)));
  s.rho = gpu(scalar_tensor(0.8125, DType::f32));
  s.pi = gpu(scalar_tensor(-1.37, DType::f32));
  s.lanes = gpu(random_tensor({kRowMixRows, 28}, DType::bf16, seed + 20));
  return s;
}

TEST_P(MixRowVersionsCuda, ForwardV2EqualsV1BitForBit) {
  GPT_REQUIRE_CUDA_DEVICE();
  const RowMixSetup s = row_mix_setup(GetParam().terms, 500);
  const auto terms = s.terms();
  Tensor v1 = Tensor::empty({kRowMixRows, kRowMixWidth}, DType::bf16, Device::cuda), v2 = v1.clone();
  poison(v1);
  poison(v2);
  ASSERT_EQ(cuda::mix_row_terms(terms, {}, v2), GetParam().terms) << "the one-pass kernel must take this call";
  cuda::mix_forward_version(terms, v1, 1);
  cuda::mix_forward_version(terms, v2, 2);
  EXPECT_EQ(v2.to_doubles(), v1.to_doubles());
}

// out aliases x0: every term of a pack is read before the pack is written.
TEST_P(MixRowVersionsCuda, InPlaceForwardV2EqualsV1) {
  GPT_REQUIRE_CUDA_DEVICE();
  const RowMixSetup s1 = row_mix_setup(GetParam().terms, 600);
  RowMixSetup s2 = s1;
  s2.x[0] = s1.x[0].clone();
  RowMixSetup s1_copy = s1;
  s1_copy.x[0] = s1.x[0].clone();
  cuda::mix_forward_version(s1_copy.terms(), s1_copy.x[0], 1);
  cuda::mix_forward_version(s2.terms(), s2.x[0], 2);
  EXPECT_EQ(s2.x[0].to_doubles(), s1_copy.x[0].to_doubles());
}

// dx of term 0 and 1 overwrite (the first writers of x's and a's gradients), the others accumulate (x0's and Bg's
// gradients gather over layers); the last term's dx is dout itself, overwritten in place; scalar and lane gradients
// for every term, the lane gradients of two terms in one tensor.
TEST_P(MixRowVersionsCuda, BackwardV3AndV4EqualV1BitForBit) {
  GPT_REQUIRE_CUDA_DEVICE();
  const int n_terms = GetParam().terms;
  const RowMixSetup s = row_mix_setup(n_terms, 700);
  const auto terms = s.terms();
  const Tensor dout_start = gpu(random_tensor({kRowMixRows, kRowMixWidth}, DType::bf16, 710));
  std::vector<Tensor> dx_start;
  for (int k = 0; k < n_terms; ++k)
    dx_start.push_back(gpu(random_tensor({kRowMixRows, kRowMixWidth}, DType::bf16, 720 + k)));
  const Tensor dl_start = gpu(random_tensor({kRowMixRows, 28}, DType::bf16, 730));
  // Each scalar gradient has a tensor of its own (two terms adding into one would race in the scalar reduction).
  struct Out {
    Tensor dout, dl;
    std::vector<Tensor> dx, dscalar;
  };
  auto run = [&](int version) {
    Out o{dout_start.clone(), dl_start.clone(), {}, {}};
    for (const Tensor& d : dx_start) o.dx.push_back(d.clone());
    std::vector<MixGrad> grads(static_cast<size_t>(n_terms));
    for (int k = 0; k < n_terms; ++k) {
      MixGrad& g = grads[static_cast<size_t>(k)];
      const bool last = k == n_terms - 1 && n_terms > 1;
      g.dx = last ? o.dout : o.dx[static_cast<size_t>(k)];
      g.overwrite_dx = k < 2 || last;
      o.dscalar.push_back(gpu(scalar_tensor(0.25 - 0.5 * k, DType::f32)));
      if (k == 4) continue;  // no coefficient gradient: dx alone
      if (k % 4 != 2) g.dscalar = o.dscalar.back();
      if (k % 4 >= 2) g.dlanes = o.dl;
    }
    if (version != 1) {
      EXPECT_EQ(cuda::mix_row_terms(terms, grads, o.dout), n_terms) << "the one-pass kernel must take this call";
    }
    cuda::mix_backward_version(o.dout, terms, grads, version);
    return o;
  };
  const Out v1 = run(1);
  for (int version : {3, 4}) {
    SCOPED_TRACE("version " + std::to_string(version));
    const Out v = run(version);
    EXPECT_EQ(v.dout.to_doubles(), v1.dout.to_doubles());
    EXPECT_EQ(v.dl.to_doubles(), v1.dl.to_doubles());
    for (int k = 0; k < n_terms; ++k) {
      EXPECT_EQ(v.dx[k].to_doubles(), v1.dx[k].to_doubles()) << "dx" << k;
      EXPECT_EQ(v.dscalar[k].to_doubles(), v1.dscalar[k].to_doubles()) << "dscalar" << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Terms, MixRowVersionsCuda,
                         ::testing::Values(RowMixCase{"scale_weight", 1}, RowMixCase{"mlp_mix", 2},
                                           RowMixCase{"layer0_mix", 3}, RowMixCase{"residual_mix", 4},
                                           RowMixCase{"five_terms", 5}),
                         [](const auto& info) { return std::string(info.param.name); });

// mix_rmsnorm_forward in one kernel (the one-pass mix, the norm from the row kept in shared memory) equals
// mix_forward then rmsnorm_forward bit for bit: out, y and rstd, and with out written in place over x0.
TEST_P(MixRowVersionsCuda, WithItsNormEqualsTheTwoOpsBitForBit) {
  GPT_REQUIRE_CUDA_DEVICE();
  const RowMixSetup s = row_mix_setup(GetParam().terms, 900);
  const auto terms = s.terms();
  const Shape shape{kRowMixRows, kRowMixWidth};
  auto poisoned = [](const Shape& sh, DType dtype) {
    Tensor t = Tensor::empty(sh, dtype, Device::cuda);
    poison(t);
    return t;
  };
  Tensor out_ref = poisoned(shape, DType::bf16), y_ref = poisoned(shape, DType::bf16);
  Tensor rstd_ref = poisoned({kRowMixRows}, DType::f32);
  ASSERT_EQ(cuda::mix_row_terms(terms, {}, out_ref), GetParam().terms) << "the one-pass kernel must take this call";
  mix_forward(terms, out_ref);
  rmsnorm_forward(out_ref, y_ref, rstd_ref);
  Tensor out = poisoned(shape, DType::bf16), y = poisoned(shape, DType::bf16),
         rstd = poisoned({kRowMixRows}, DType::f32);
  mix_rmsnorm_forward(terms, out, y, rstd);
  EXPECT_EQ(out.to_doubles(), out_ref.to_doubles());
  EXPECT_EQ(y.to_doubles(), y_ref.to_doubles());
  EXPECT_EQ(rstd.to_doubles(), rstd_ref.to_doubles());

  RowMixSetup onto_x0 = s;
  onto_x0.x[0] = s.x[0].clone();
  Tensor y_in_place = poisoned(shape, DType::bf16), rstd_in_place = poisoned({kRowMixRows}, DType::f32);
  mix_rmsnorm_forward(onto_x0.terms(), onto_x0.x[0], y_in_place, rstd_in_place);
  EXPECT_EQ(onto_x0.x[0].to_doubles(), out_ref.to_doubles());
  EXPECT_EQ(y_in_place.to_doubles(), y_ref.to_doubles());
  EXPECT_EQ(rstd_in_place.to_doubles(), rstd_ref.to_doubles());
}

// Calls the one kernel cannot take run the two ops: grouped lanes (mix v1), f32 rows, and a norm over a last
// dimension shorter than the mix's rows ([rows, 6, 128]: six norms per row).
TEST(MixRowVersionsCuda, WithItsNormFallsBackToTheTwoOps) {
  GPT_REQUIRE_CUDA_DEVICE();
  const RowMixSetup s = row_mix_setup(4, 950);
  auto grouped = s.terms();
  grouped[2].coef = Coef::of_lane(s.lanes, 0, 6);
  auto as_f32 = [](const Tensor& t) { return t.to(Device::cpu).to(DType::f32).to(Device::cuda); };
  const Tensor lanes32 = as_f32(s.lanes);
  std::vector<MixTerm> f32_terms;
  for (const MixTerm& t : s.terms()) {
    Coef c = t.coef;
    if (c.lanes.defined()) c.lanes = lanes32;
    f32_terms.push_back({as_f32(t.x), c});
  }
  auto per_head = [](std::vector<MixTerm> terms) {
    for (MixTerm& t : terms) t.x = t.x.view({kRowMixRows, 6, 128});
    return terms;
  };
  const std::pair<const char*, std::vector<MixTerm>> cases[] = {
      {"grouped lanes", grouped}, {"f32 rows", f32_terms}, {"per-head rows", per_head(s.terms())}};
  for (const auto& [name, terms] : cases) {
    const Shape shape = terms.front().x.shape();
    const DType dtype = terms.front().x.dtype();
    const int64_t norm_rows = terms.front().x.numel() / shape.back();
    Tensor out_ref = Tensor::empty(shape, dtype, Device::cuda), y_ref = out_ref.clone();
    Tensor rstd_ref = Tensor::empty({norm_rows}, DType::f32, Device::cuda);
    mix_forward(terms, out_ref);
    rmsnorm_forward(out_ref, y_ref, rstd_ref);
    Tensor out = Tensor::empty(shape, dtype, Device::cuda), y = out.clone(), rstd = rstd_ref.clone();
    mix_rmsnorm_forward(terms, out, y, rstd);
    EXPECT_EQ(out.to_doubles(), out_ref.to_doubles()) << name;
    EXPECT_EQ(y.to_doubles(), y_ref.to_doubles()) << name;
    EXPECT_EQ(rstd.to_doubles(), rstd_ref.to_doubles()) << name;
  }
}

// Calls the one-pass versions must leave to v1: grouped lanes, a dx that is another term's x, two terms sharing a
// dx, more than five terms, f32 rows.
TEST(MixRowVersionsCuda, LeavesOtherCallsToV1) {
  GPT_REQUIRE_CUDA_DEVICE();
  const RowMixSetup s = row_mix_setup(4, 800);
  Tensor out = Tensor::empty({kRowMixRows, kRowMixWidth}, DType::bf16, Device::cuda);
  auto terms = s.terms();
  ASSERT_EQ(cuda::mix_row_terms(terms, {}, out), 4);
  auto grouped = terms;
  grouped[2].coef = Coef::of_lane(s.lanes, 0, 6);
  EXPECT_EQ(cuda::mix_row_terms(grouped, {}, out), 0);
  std::vector<MixGrad> grads(4);
  grads[0].dx = s.x[1];
  EXPECT_EQ(cuda::mix_row_terms(terms, grads, out), 0) << "dx0 is x1";
  Tensor shared = out.clone();
  grads[0].dx = shared;
  grads[1].dx = shared;
  EXPECT_EQ(cuda::mix_row_terms(terms, grads, out), 0) << "dx0 and dx1 are one tensor";
  std::vector<MixTerm> six(6, terms[0]);
  EXPECT_EQ(cuda::mix_row_terms(six, {}, out), 0);
  Tensor out32 = Tensor::empty({kRowMixRows, kRowMixWidth}, DType::f32, Device::cuda);
  EXPECT_EQ(cuda::mix_row_terms(terms, {}, out32), 0);
}

// §2.7: the MUDD factor 0.1 in fp32, never rounded to bf16: 0.1f·2.25 -> bf16 0.224609375 (a bf16-rounded factor
// gives 0.2255859375), on the CPU reference and on CUDA alike.
TEST(MixUnroundedScalarCuda, KeepsTheFp32Factor) {
  GPT_REQUIRE_CUDA_DEVICE();
  Tensor x = gpu(Tensor::from_doubles(std::vector<double>{2.25, -2.25, 2.25, 2.25}, {4, 1}, DType::bf16));
  Tensor tenth = gpu(Tensor::from_doubles(std::vector<double>{0.1}, {1}, DType::f32));
  Tensor out = Tensor::empty({4, 1}, DType::bf16, Device::cuda);
  poison(out);
  const MixTerm term{x, Coef::unrounded_scalar(tenth)};
  mix_forward({&term, 1}, out);
  EXPECT_EQ(out.to_doubles(), (std::vector<double>{0.224609375, -0.224609375, 0.224609375, 0.224609375}));
}

TEST(ScaleWeightCuda, ForwardAndBackwardMatchCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const Tensor w = random_tensor({768, 3072}, DType::bf16, 401);
  const Tensor lam = scalar_tensor(1.37, DType::f32);
  Tensor out_cpu = Tensor::empty(w.shape(), DType::bf16), out_gpu = Tensor::empty(w.shape(), DType::bf16, Device::cuda);
  poison(out_gpu);
  scale_weight_forward(w, lam, out_cpu);
  scale_weight_forward(gpu(w), gpu(lam), out_gpu);
  EXPECT_EQ(rel_error(out_gpu, out_cpu), 0.0) << "one bf16 product, rounded once";
  const Tensor dwo = random_tensor(w.shape(), DType::bf16, 402);
  Tensor dw_cpu = random_tensor(w.shape(), DType::bf16, 403), dw_gpu = gpu(dw_cpu);
  Tensor dl_cpu = scalar_tensor(0.0, DType::f32), dl_gpu = gpu(dl_cpu);
  scale_weight_backward(dwo, w, lam, dw_cpu, dl_cpu);
  scale_weight_backward(gpu(dwo), gpu(w), gpu(lam), dw_gpu, dl_gpu);
  EXPECT_EQ(rel_error(dw_gpu, dw_cpu), 0.0);
  EXPECT_LT(rel_error(dl_gpu, dl_cpu), 1e-4);
}

}  // namespace
}  // namespace gpt
