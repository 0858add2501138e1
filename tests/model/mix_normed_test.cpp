// taped::mix_normed and taped::rmsnorm(…, PendingNorm&) (trainer/model/taped_ops.h): the norm's forward made with the
// mix, its backward recorded where the plain rmsnorm records it, so values and gradients are those of mix then
// rmsnorm, bit for bit; a pending norm serves only the tensor it was made of and is never silently dropped. A norm
// recorded right after its mix has its backward folded into the mix's (mix_rmsnorm_backward): the same gradients bit
// for bit, in a lone mix and in the whole model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/gradcheck.h"
#include "tests/common/model_fixtures.h"
#include "trainer/model/taped_ops.h"

namespace gpt {
namespace {

using taped::term;
using testing::random_tensor;

struct Inputs {
  Var x, a, rho, other;
};

Inputs make_inputs(DType dtype = DType::f32) {
  return {Var(random_tensor({9, 16}, dtype, 41)), Var(random_tensor({9, 16}, dtype, 42)),
          Var(Tensor::from_doubles(std::vector<double>{0.75}, {1}, stat_dtype(dtype))),
          Var(random_tensor({9, 16}, dtype, 43))};
}

struct Results {
  std::vector<double> h, dx, da, drho, dother;
};

enum class Norm { plain, fused, fused_recorded_early };

// h = norm(ρ·x + a) with two more readers of the mix recorded between the mix and the norm, then the backward of
// Σ h ⊙ dy + Σ bᵢ ⊙ dbᵢ in bf16. The mix's gradient gathers three terms, so the order of the norm's backward among
// them shows in the bits: `fused_recorded_early` records it at the mix, as a fusion that moved the tape would.
Results run(Norm norm) {
  Inputs in = make_inputs(DType::bf16);
  Tape tape;
  taped::PendingNorm pending;
  const std::vector<taped::Term> terms = {term(in.x).scaled(in.rho), term(in.a)};
  Var mixed = norm == Norm::plain ? taped::mix(tape, terms) : taped::mix_normed(tape, terms, pending);
  Var h;
  if (norm == Norm::fused_recorded_early) h = taped::rmsnorm(tape, mixed, pending);
  Var b1 = taped::mix(tape, {term(mixed).scaled(in.rho), term(in.other)});
  Var b2 = taped::mix(tape, {term(mixed), term(in.other).scaled(in.rho)});
  if (norm == Norm::plain) h = taped::rmsnorm(tape, mixed);
  if (norm == Norm::fused) h = taped::rmsnorm(tape, mixed, pending);
  EXPECT_FALSE(pending.waiting());
  h.grad().copy_from(random_tensor({9, 16}, DType::bf16, 44));
  b1.grad().copy_from(random_tensor({9, 16}, DType::bf16, 45));
  b2.grad().copy_from(random_tensor({9, 16}, DType::bf16, 46));
  tape.backward();
  return {h.value().to_doubles(), in.x.grad().to_doubles(), in.a.grad().to_doubles(), in.rho.grad().to_doubles(),
          in.other.grad().to_doubles()};
}

TEST(MixNormed, GivesTheValuesAndGradientsOfMixThenRmsnorm) {
  const Results plain = run(Norm::plain), fused = run(Norm::fused);
  EXPECT_EQ(fused.h, plain.h);
  EXPECT_EQ(fused.dx, plain.dx);
  EXPECT_EQ(fused.da, plain.da);
  EXPECT_EQ(fused.drho, plain.drho);
  EXPECT_EQ(fused.dother, plain.dother);
  // The check sees the order: the norm's backward recorded at the mix changes the mix's gradient.
  EXPECT_NE(run(Norm::fused_recorded_early).dx, plain.dx);
}

TEST(MixNormed, ANormOfAnotherTensorIsComputedAnewAndTheMadeOneKeepsWaiting) {
  Inputs in = make_inputs();
  Tape tape;
  taped::PendingNorm pending;
  Var mixed = taped::mix_normed(tape, {term(in.x), term(in.a)}, pending);
  Var other_norm = taped::rmsnorm(tape, in.other, pending);
  EXPECT_TRUE(pending.waiting());
  EXPECT_EQ(other_norm.value().to_doubles(), taped::rmsnorm(tape, in.other).value().to_doubles());
  taped::rmsnorm(tape, mixed, pending);
  EXPECT_FALSE(pending.waiting());
}

TEST(MixNormed, ANormMadeButNeverReadIsAnErrorAtTheNextMix) {
  Inputs in = make_inputs();
  Tape tape;
  taped::PendingNorm pending;
  taped::mix_normed(tape, {term(in.x), term(in.a)}, pending);
  try {
    taped::mix_normed(tape, {term(in.a), term(in.x)}, pending);
    ADD_FAILURE() << "a second pending norm replaced an unread one";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("was never used"), std::string::npos) << e.what();
  }
}

// The fold runs where the norm is recorded right after its mix (`fused_recorded_early`; the readers recorded after
// the norm have added to the mix's gradient by the time the folded steps run) and nowhere else (`fused`).
TEST(MixNormed, FoldingTheNormBackwardIntoTheMixChangesNoBit) {
  for (Norm norm : {Norm::fused, Norm::fused_recorded_early}) {
    SCOPED_TRACE(static_cast<int>(norm));
    Results folded, apart;
    {
      const taped::detail::ScopedMixNormBackwardFold on(true);
      folded = run(norm);
    }
    {
      const taped::detail::ScopedMixNormBackwardFold off(false);
      apart = run(norm);
    }
    EXPECT_EQ(folded.dx, apart.dx);
    EXPECT_EQ(folded.da, apart.da);
    EXPECT_EQ(folded.drho, apart.drho);
    EXPECT_EQ(folded.dother, apart.dother);
  }
}

// Every parameter gradient of a bf16 model's forward and backward (§0.4 roundings) with the folds and without.
TEST(MixNormed, ModelGradientsAreTheSameWithTheNormBackwardFoldedOrNot) {
  const ModelDims dims = testing::small_dims();
  ModelWeights base = init_weights(dims, 21, DType::f64);
  testing::perturb_weights(base, 22);
  testing::ModelHarness h(testing::convert_weights(base, DType::bf16));
  const Microbatch mb = testing::make_microbatch({25, 24}, dims.vocab, 512, 0, 9);
  StepConfig cfg = testing::make_config(dims, 48, DType::bf16, 5, 12, 0.3);
  cfg.mtp_weights = {1.0f, 0.5f};
  auto gradients = [&](bool fold) {
    const taped::detail::ScopedMixNormBackwardFold scoped(fold);
    Tape tape;
    h.params.zero_grads();
    const double loss = h.model->train_forward_backward(mb, cfg, tape);
    std::vector<std::vector<double>> grads = {{loss}};
    for (const Parameter& p : h.params.all()) grads.push_back(p.grad.to_doubles());
    return grads;
  };
  const auto folded = gradients(true), apart = gradients(false);
  ASSERT_EQ(folded.size(), apart.size());
  EXPECT_EQ(folded[0], apart[0]) << "loss";
  size_t k = 1;
  for (const Parameter& p : h.params.all()) {
    EXPECT_EQ(folded[k], apart[k]) << p.name;
    ++k;
  }
}

}  // namespace
}  // namespace gpt
