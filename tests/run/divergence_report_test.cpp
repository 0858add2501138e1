#include "trainer/run/divergence_report.h"

#include <limits>

#include <gtest/gtest.h>

namespace gpt {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

NamedTensor named(const std::string& name, std::vector<double> values, DType dtype = DType::f32) {
  const auto n = static_cast<int64_t>(values.size());
  return {name, Tensor::from_doubles(values, {n}, dtype, Device::cpu)};
}

TEST(DivergenceReport, FiniteStateSaysTheValueAroseInTheComputation) {
  const std::vector<NamedTensor> state = {
      named("param/a", {1, -2}), named("adam/a/m", {0, 0}), {"buffer/ids", Tensor::zeros({2}, DType::i64)}};
  EXPECT_TRUE(nonfinite_tensors(state).empty());
  EXPECT_EQ(describe_nonfinite_state(state),
            "every one of the 2 floating state tensors is finite (param 1, adam 1): the non-finite value arose in the "
            "computation");
}

TEST(DivergenceReport, NamesEachNonFiniteTensorByGroupInListOrder) {
  const std::vector<NamedTensor> state = {named("param/a", {1, kNan}),
                                          named("param/b", {1, 2}),
                                          named("grad/a", {-kInf, 0}),
                                          named("adam/a/m", {0}),
                                          named("ngram/shard", {kInf}, DType::bf16),
                                          named("param/c", {kNan})};
  EXPECT_EQ(nonfinite_tensors(state), (std::vector<std::string>{"param/a", "grad/a", "ngram/shard", "param/c"}));
  EXPECT_EQ(describe_nonfinite_state(state),
            "non-finite state: param 2 of 3 (a, c); grad 1 of 1 (a); ngram 1 of 1 (shard); finite: adam 1");
}

TEST(DivergenceReport, CutsALongListAfterMaxNames) {
  const std::vector<NamedTensor> state = {named("grad/a", {kNan}), named("grad/b", {kNan}), named("grad/c", {kNan}),
                                          named("unnamed", {kNan})};
  EXPECT_EQ(describe_nonfinite_state(state, 2),
            "non-finite state: grad 3 of 3 (a, b and 1 more); unnamed 1 of 1 (unnamed)");
}

// The largest finite f32 and bf16 values square to about 1.2e77 in double: finite, so not reported.
TEST(DivergenceReport, LargestFiniteValuesAreFinite) {
  const double f32_max = std::numeric_limits<float>::max();
  const std::vector<NamedTensor> state = {named("f32", {f32_max, -f32_max}), named("bf16", {3.3e38}, DType::bf16)};
  EXPECT_TRUE(nonfinite_tensors(state).empty());
}

TEST(DivergenceReport, EmptyAndUndefinedTensorsAreNotTested) {
  const std::vector<NamedTensor> state = {named("empty", {}), {"undefined", Tensor{}}, named("param/a", {kNan})};
  EXPECT_EQ(describe_nonfinite_state(state), "non-finite state: param 1 of 1 (a)");
}

}  // namespace
}  // namespace gpt
