// CUDA mix_rmsnorm_backward (kernels/cuda/mix_norm_backward.cu): on the calls mix_backward's one-pass kernel takes,
// dout formed in that kernel's registers must give the bits of CUDA rmsnorm_backward into a copy of the old
// gradient followed by CUDA mix_backward (dx, lane and scalar gradients, the old gradient left as it was or
// overwritten as a term's dx); calls it cannot take run the two ops. Against the CPU, each op within its own
// tolerance (expect_close_to_cpu).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cuda/mix_variants.h"
#include "kernels/elementwise.h"
#include "kernels/rmsnorm.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {
namespace mix_norm_backward_cuda {  // apart from the names of the other tests of a unity batch

using namespace ops_cuda_testing;
using gpu_testing::bit_mismatches;
using testing::random_tensor;

constexpr int64_t kRows = 4099;  // not a multiple of the block's eight warps

// The residual mixes' terms (residual_mix_terms); `grouped` gives term 2 six lane groups (per-head gates), which the
// one-pass kernel does not take.
struct Inputs {
  std::vector<Tensor> x;
  Tensor rho, pi, lanes, normed_x, dy, rstd;
  bool grouped = false;

  std::vector<MixTerm> terms() const { return residual_mix_terms(x, rho, pi, lanes, grouped); }
  Inputs to(Device device) const {
    Inputs d = *this;
    for (Tensor& t : d.x) t = t.to(device);
    for (Tensor* t : {&d.rho, &d.pi, &d.lanes, &d.normed_x, &d.dy, &d.rstd}) *t = t->to(device);
    return d;
  }
};

// On the CPU; rstd is the norm's of normed_x, so both devices start from the same bits.
Inputs make_inputs(int terms, int64_t n, DType dtype, uint64_t seed) {
  Inputs in;
  for (int k = 0; k < terms; ++k) in.x.push_back(random_tensor({kRows, n}, dtype, seed + k));
  const DType sd = stat_dtype(dtype);
  in.rho = scalar_tensor(0.8125, sd);
  in.pi = scalar_tensor(-1.37, sd);
  in.lanes = random_tensor({kRows, 28}, dtype, seed + 20);
  in.normed_x = random_tensor({kRows, n}, dtype, seed + 21);
  in.dy = random_tensor({kRows, n}, dtype, seed + 22);
  in.rstd = Tensor::empty({kRows}, sd);
  Tensor y = in.normed_x.clone();
  rmsnorm_forward(in.normed_x, y, in.rstd);
  return in;
}

// The gradient outputs, from the same start on every run: dx of terms 0 and 1 overwritten, the others added into;
// with an old gradient the last term (of several) overwrites that gradient itself; scalar and lane gradients as in
// the mix_backward version tests.
struct Outputs {
  Tensor old, dl;
  std::vector<Tensor> dx, dscalar;
};

enum class Path { fused, two_ops };

// The old gradient every run starts from.
Tensor old_start(const Inputs& in) {
  return random_tensor(in.normed_x.shape(), in.normed_x.dtype(), 710).to(in.normed_x.device());
}

// rmsnorm_backward's share added to the old gradient (or written, without one): the two ops' dout.
Tensor norm_dout(const Inputs& in, bool has_old) {
  Tensor dout = has_old ? old_start(in) : Tensor::empty(in.normed_x.shape(), in.normed_x.dtype(), in.normed_x.device());
  rmsnorm_backward(in.dy, in.normed_x, in.rstd, dout, has_old ? GradWrite::add : GradWrite::overwrite);
  return dout;
}

// `given_dout` (on in's device) replaces the two ops' rmsnorm_backward: mix_backward alone on that dout.
Outputs run(const Inputs& in, bool has_old, Path path, const Tensor* given_dout = nullptr) {
  const int n_terms = static_cast<int>(in.x.size());
  const Device device = in.normed_x.device();
  const DType dtype = in.normed_x.dtype();
  const Shape shape = in.normed_x.shape();
  Outputs o{old_start(in), random_tensor({kRows, 28}, dtype, 730).to(device), {}, {}};
  std::vector<MixGrad> grads(static_cast<size_t>(n_terms));
  for (int k = 0; k < n_terms; ++k) {
    o.dx.push_back(random_tensor(shape, dtype, 720 + k).to(device));
    o.dscalar.push_back(scalar_tensor(0.25 - 0.5 * k, stat_dtype(dtype)).to(device));
    MixGrad& g = grads[static_cast<size_t>(k)];
    const bool into_old = has_old && k == n_terms - 1 && n_terms > 1;
    g.dx = into_old ? o.old : o.dx[static_cast<size_t>(k)];
    g.overwrite_dx = k < 2 || into_old;
    if (k == 4) continue;  // no coefficient gradient: dx alone
    if (k % 4 != 2) g.dscalar = o.dscalar.back();
    if (k % 4 >= 2) g.dlanes = o.dl;
  }
  const auto terms = in.terms();
  if (path == Path::fused) {
    mix_rmsnorm_backward(has_old ? &o.old : nullptr, in.dy, in.normed_x, in.rstd, terms, grads);
  } else {
    const Tensor dout = given_dout != nullptr ? given_dout->clone() : norm_dout(in, has_old);
    mix_backward(dout, terms, grads);
  }
  return o;
}

void expect_same_bits(const Outputs& a, const Outputs& b) {
  EXPECT_EQ(bit_mismatches(a.old, b.old), 0) << "old gradient";
  EXPECT_EQ(bit_mismatches(a.dl, b.dl), 0) << "lane gradients";
  for (size_t k = 0; k < a.dx.size(); ++k) {
    EXPECT_EQ(bit_mismatches(a.dx[k], b.dx[k]), 0) << "dx" << k;
    EXPECT_EQ(bit_mismatches(a.dscalar[k], b.dscalar[k]), 0) << "dscalar" << k;
  }
}

// Against the CPU, each op within its own tolerance: the norm's dout (the dot of a row sums in another order on each
// device, so dout differs by a rounding here and there), then the mix on the GPU's dout (kernels/cpu: the same
// rows·n products; the scalar sums in another order: 1e-4, as the mix tests allow). Judging the mix on the CPU's own
// dout instead would make a scalar gradient that nearly cancels carry the norm's roundings as a large relative error.
void expect_close_to_cpu(const Outputs& gpu_out, const Inputs& cpu, const Inputs& dev, bool has_old) {
  const DType dtype = cpu.normed_x.dtype();
  const double tol = tolerance_for(dtype);
  const Tensor gpu_dout = norm_dout(dev, has_old).to(Device::cpu);
  EXPECT_LT(rel_error(gpu_dout, norm_dout(cpu, has_old)), tol) << "the norm's dout";
  const Outputs cpu_out = run(cpu, has_old, Path::two_ops, &gpu_dout);
  const double scalar_tol = dtype == DType::f64 ? 1e-12 : 1e-4;
  EXPECT_LT(rel_error(gpu_out.old, cpu_out.old), tol) << "old gradient";
  EXPECT_LT(rel_error(gpu_out.dl, cpu_out.dl), tol) << "lane gradients";
  for (size_t k = 0; k < gpu_out.dx.size(); ++k) {
    EXPECT_LT(rel_error(gpu_out.dx[k], cpu_out.dx[k]), tol) << "dx" << k;
    EXPECT_LT(rel_error(gpu_out.dscalar[k], cpu_out.dscalar[k]), scalar_tol) << "dscalar" << k;
  }
}

struct FusedCase {
  const char* name;
  int terms;
};

class MixNormBackwardCuda : public ::testing::TestWithParam<FusedCase> {};

TEST_P(MixNormBackwardCuda, FusedEqualsTheTwoOpsBitForBit) {
  GPT_REQUIRE_CUDA_DEVICE();
  const Inputs cpu = make_inputs(GetParam().terms, 768, DType::bf16, 1000);
  const Inputs dev = cpu.to(Device::cuda);
  for (bool has_old : {false, true}) {
    SCOPED_TRACE(has_old ? "with an old gradient" : "without an old gradient");
    if (cuda::mix_backward_in_use() == 3) {
      const Outputs probe = run(dev, has_old, Path::two_ops);  // for grads of the right shape only
      std::vector<MixGrad> grads;
      for (const Tensor& dx : probe.dx) grads.push_back({.dx = dx});
      EXPECT_EQ(cuda::mix_row_terms(dev.terms(), grads, dev.normed_x), GetParam().terms)
          << "the one-pass kernel must take this call";
    }
    const Outputs fused = run(dev, has_old, Path::fused);
    expect_same_bits(fused, run(dev, has_old, Path::two_ops));
    expect_close_to_cpu(fused, cpu, dev, has_old);
  }
}

INSTANTIATE_TEST_SUITE_P(Terms, MixNormBackwardCuda,
                         ::testing::Values(FusedCase{"scale_weight", 1}, FusedCase{"mlp_mix", 2},
                                           FusedCase{"layer0_mix", 3}, FusedCase{"residual_mix", 4},
                                           FusedCase{"five_terms", 5}),
                         [](const auto& info) { return std::string(info.param.name); });

// Calls the one-pass kernel does not take (grouped lanes; f32 rows; rows that are not whole 16-byte packs) run the
// two ops, with the same results.
TEST(MixNormBackwardFallbackCuda, EqualsTheTwoOps) {
  GPT_REQUIRE_CUDA_DEVICE();
  struct Fallback {
    const char* name;
    DType dtype;
    int64_t n;
    bool grouped;
  };
  for (const Fallback& f :
       {Fallback{"grouped lanes", DType::bf16, 768, true}, Fallback{"f32 rows", DType::f32, 768, false},
        Fallback{"unpacked rows", DType::bf16, 36, false}}) {
    SCOPED_TRACE(f.name);
    Inputs cpu = make_inputs(4, f.n, f.dtype, 1100);
    cpu.grouped = f.grouped;
    const Inputs dev = cpu.to(Device::cuda);
    std::vector<MixGrad> grads(4);
    EXPECT_EQ(cuda::mix_row_terms(dev.terms(), grads, dev.normed_x), 0);
    for (bool has_old : {false, true}) {
      SCOPED_TRACE(has_old ? "with an old gradient" : "without an old gradient");
      const Outputs fused = run(dev, has_old, Path::fused);
      expect_same_bits(fused, run(dev, has_old, Path::two_ops));
      expect_close_to_cpu(fused, cpu, dev, has_old);
    }
  }
}

}  // namespace mix_norm_backward_cuda
}  // namespace
}  // namespace gpt
