#pragma once
// A minimal reverse-mode tape for writing the model once: the forward pass records, for each op it runs, a
// closure that calls the op's backward; `backward()` replays them in reverse. Ops themselves stay explicit
// forward/backward pairs in kernels/ (testable one by one); the tape only orders them.
//
// Gradients live in `Var` slots, allocated (zeroed) on first use, so a value read in several places
// collects its gradient by accumulation (kernels' backward ops add into their outputs). Parameters are Vars
// whose slots hold the persistent gradient buffers the optimizer reads. A reshaped view of a Var shares its slot
// (Var::reshaped): the gradient is allocated by whichever of the two writes it first, so a first writer that
// overwrites (grad_for_overwrite) saves the zero fill through a view too.
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/tensor.h"

namespace gpt {

class Var {
 public:
  Var() = default;
  explicit Var(Tensor value, bool requires_grad = true)
      : value_(std::move(value)), slot_(requires_grad ? std::make_shared<Tensor>() : nullptr) {}
  // A parameter: its gradient buffer is owned elsewhere (e.g. the optimizer's gradient tensor).
  static Var with_gradient_buffer(Tensor value, Tensor grad) {
    GPT_CHECK(grad.shape() == value.shape() && grad.device() == value.device(), "Var: gradient buffer ",
              grad.describe(), " does not match value ", value.describe());
    Var v(std::move(value));
    *v.slot_ = std::move(grad);
    return v;
  }

  // x's value in another shape (same elements, contiguous), sharing x's gradient slot: a gradient written through
  // either is the other's, and none is allocated until one of them is asked for it.
  static Var reshaped(const Var& x, const Shape& shape) {
    Var v;
    v.value_ = x.value_.view(shape);
    v.slot_ = x.slot_;
    return v;
  }

  const Tensor& value() const { return value_; }
  Tensor& value() { return value_; }
  bool requires_grad() const { return slot_ != nullptr; }
  // True once something has written a gradient (or a buffer was attached).
  bool has_grad() const { return slot_ && slot_->defined(); }
  // The gradient, zero-allocated on first use; same shape, dtype and device as the value.
  Tensor& grad() {
    GPT_CHECK(slot_ != nullptr, "grad() of a Var that does not require a gradient (", value_.describe(), ")");
    if (!slot_->defined()) *slot_ = Tensor::zeros(value_.shape(), value_.dtype(), value_.device());
    return in_value_shape();
  }
  // The gradient for an op about to write every element of it. When none exists yet it is allocated without the
  // zero fill and `fresh` is set: the op then writes instead of adding into zeros (the same values, without the
  // fill and the read-back of a [tokens, d] buffer). Otherwise the op must add, as into grad().
  Tensor& grad_for_overwrite(bool& fresh) {
    GPT_CHECK(slot_ != nullptr, "grad_for_overwrite() of a Var that does not require a gradient (", value_.describe(),
              ")");
    fresh = !slot_->defined();
    if (fresh) *slot_ = Tensor::empty(value_.shape(), value_.dtype(), value_.device());
    return in_value_shape();
  }

 private:
  // The slot's gradient seen in this Var's shape (a reshaped view may share a slot allocated in another shape).
  Tensor& in_value_shape() {
    if (slot_->shape() == value_.shape()) return *slot_;
    reshaped_grad_ = slot_->view(value_.shape());
    return reshaped_grad_;
  }

  Tensor value_;
  std::shared_ptr<Tensor> slot_;
  Tensor reshaped_grad_;  // in_value_shape()'s view when the slot has another shape
};

// One recorded op: its backward closure plus, for step-by-step diagnostics (Tape::backward_last), a label and the
// Vars it touches: `vars[0]` is the op's output (its gradient is what the step consumes; an undefined Var for the
// loss, which has none), the rest are the inputs whose gradients the step adds into.
struct TapeStep {
  std::function<void()> backward;
  const char* label = "";
  std::vector<Var> vars;
};

class Tape {
 public:
  using Backward = std::function<void()>;

  // While disabled (validation), push() drops closures, so no activation is kept alive.
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }

  void push(Backward fn, const char* label = "", std::vector<Var> vars = {}) {
    if (enabled_) steps_.push_back(TapeStep{std::move(fn), label, std::move(vars)});
  }
  // Runs every recorded backward in reverse order and forgets them.
  void backward() {
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) it->backward();
    steps_.clear();
  }
  // Runs only the most recent step and hands it back (its Vars now hold the step's gradients): lets a test walk
  // two tapes of the same model in lockstep and name the first op whose gradients disagree.
  TapeStep backward_last() {
    GPT_CHECK(!steps_.empty(), "Tape::backward_last: the tape is empty");
    TapeStep step = std::move(steps_.back());
    steps_.pop_back();
    step.backward();
    return step;
  }
  void clear() { steps_.clear(); }
  size_t size() const { return steps_.size(); }

 private:
  std::vector<TapeStep> steps_;
  bool enabled_ = true;
};

}  // namespace gpt
