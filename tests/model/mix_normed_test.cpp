// taped::mix_normed and taped::rmsnorm(…, PendingNorm&) (trainer/model/taped_ops.h): the norm's forward made with the
// mix, its backward recorded where the plain rmsnorm records it, so values and gradients are those of mix then
// rmsnorm, bit for bit; a pending norm serves only the tensor it was made of and is never silently dropped.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/gradcheck.h"
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

}  // namespace
}  // namespace gpt
