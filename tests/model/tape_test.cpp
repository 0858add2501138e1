#include <gtest/gtest.h>

#include "kernels/rmsnorm.h"
#include "tests/common/gradcheck.h"
#include "trainer/model/tape.h"

namespace gpt {
namespace {

TEST(Tape, ReplaysInReverseOrder) {
  Tape tape;
  std::vector<int> order;
  tape.push([&] { order.push_back(1); });
  tape.push([&] { order.push_back(2); });
  tape.backward();
  EXPECT_EQ(order, (std::vector<int>{2, 1}));
  EXPECT_EQ(tape.size(), 0u);
}

TEST(Tape, DisabledTapeRecordsNothing) {
  Tape tape;
  tape.set_enabled(false);
  tape.push([] { FAIL() << "must not run"; });
  tape.backward();
}

TEST(Var, GradientIsZeroAllocatedOnFirstUse) {
  Var v(Tensor::zeros({2, 3}, DType::f32));
  EXPECT_FALSE(v.has_grad());
  Tensor& g = v.grad();
  EXPECT_TRUE(v.has_grad());
  EXPECT_EQ(g.shape(), (Shape{2, 3}));
  for (double x : g.to_doubles()) EXPECT_EQ(x, 0.0);
}

TEST(Var, CopiesShareTheGradientSlot) {
  Var a(Tensor::zeros({2}, DType::f32));
  Var b = a;  // closures capture Vars by value
  b.grad().data<float>()[0] = 3.0f;
  EXPECT_EQ(a.grad().data<float>()[0], 3.0f);
}

TEST(Var, OnlyTheFirstWriterOfAGradientMayOverwriteIt) {
  Var v(Tensor::zeros({2, 3}, DType::f32));
  bool fresh = false;
  Tensor& first = v.grad_for_overwrite(fresh);
  EXPECT_TRUE(fresh);
  EXPECT_TRUE(v.has_grad());
  EXPECT_EQ(first.shape(), (Shape{2, 3}));
  first.data<float>()[0] = 5.0f;  // the first writer fills it
  Tensor& second = v.grad_for_overwrite(fresh);
  EXPECT_FALSE(fresh) << "a second writer must add";
  EXPECT_EQ(second.data<float>()[0], 5.0f);
  EXPECT_EQ(v.grad().data<float>()[0], 5.0f);

  Var zeroed(Tensor::zeros({2}, DType::f32));
  zeroed.grad();
  zeroed.grad_for_overwrite(fresh);
  EXPECT_FALSE(fresh) << "a zero-allocated gradient is already held";
  Var attached = Var::with_gradient_buffer(Tensor::zeros({2}, DType::f32), Tensor::zeros({2}, DType::f32));
  attached.grad_for_overwrite(fresh);
  EXPECT_FALSE(fresh) << "an attached buffer (a parameter's, a view's) may hold other gradients";
  Var constant(Tensor::zeros({2}, DType::f32), /*requires_grad=*/false);
  EXPECT_THROW(constant.grad_for_overwrite(fresh), Error);
}

// A reshaped view shares its base's slot without allocating it: whichever is written first allocates (in its own
// shape), and the other sees the same elements in its shape; a first writer through the view may overwrite.
TEST(Var, ReshapedViewSharesTheSlotAndAllocatesLazily) {
  Var base(Tensor::zeros({2, 6}, DType::f32));
  Var view = Var::reshaped(base, {2, 2, 3});
  EXPECT_EQ(view.value().shape(), (Shape{2, 2, 3}));
  EXPECT_FALSE(base.has_grad()) << "making the view allocates nothing";
  EXPECT_FALSE(view.has_grad());
  bool fresh = false;
  Tensor& through_view = view.grad_for_overwrite(fresh);
  EXPECT_TRUE(fresh) << "the view is the gradient's first writer";
  EXPECT_EQ(through_view.shape(), (Shape{2, 2, 3}));
  through_view.data<float>()[7] = 4.0f;
  EXPECT_TRUE(base.has_grad());
  Tensor& through_base = base.grad();
  EXPECT_EQ(through_base.shape(), (Shape{2, 6}));
  EXPECT_EQ(through_base.data<float>()[7], 4.0f);
  base.grad_for_overwrite(fresh);
  EXPECT_FALSE(fresh) << "the view already wrote it";

  Var other(Tensor::zeros({4, 3}, DType::f32));
  Var flat = Var::reshaped(other, {12});
  other.grad().data<float>()[11] = 2.0f;  // allocated through the base, in the base's shape
  EXPECT_EQ(flat.grad().shape(), (Shape{12}));
  EXPECT_EQ(flat.grad().data<float>()[11], 2.0f);
  flat.grad_for_overwrite(fresh);
  EXPECT_FALSE(fresh);
}

TEST(Var, NoGradientForConstants) {
  Var c(Tensor::zeros({2}, DType::f32), /*requires_grad=*/false);
  EXPECT_THROW(c.grad(), Error);
}

// Two uses of one value accumulate: y = norm(x), z = norm(x); loss = <y, w1> + <z, w2>.
TEST(Tape, ValueUsedTwiceAccumulatesGradients) {
  Var x(testing::random_tensor({2, 8}, DType::f64, 1));
  const Tensor w1 = testing::random_tensor({2, 8}, DType::f64, 2);
  const Tensor w2 = testing::random_tensor({2, 8}, DType::f64, 3);
  Tape tape;
  Tensor r = Tensor::empty({2}, DType::f64);
  Tensor y = Tensor::empty({2, 8}, DType::f64);
  rmsnorm_forward(x.value(), y, r);
  for (const Tensor* w : {&w1, &w2}) {
    tape.push([x, r, w]() mutable { rmsnorm_backward(*w, x.value(), r, x.grad()); });
  }
  tape.backward();
  Tensor expected = Tensor::zeros({2, 8}, DType::f64);
  rmsnorm_backward(w1, x.value(), r, expected);
  rmsnorm_backward(w2, x.value(), r, expected);
  EXPECT_LT(testing::max_relative_error(x.grad().to_doubles(), expected.to_doubles()), 1e-15);
}

}  // namespace
}  // namespace gpt
