#pragma once
// A minimal reverse-mode tape for writing the model once: the forward pass records, for each op it runs, a
// closure that calls the op's backward; `backward()` replays them in reverse. Ops themselves stay explicit
// forward/backward pairs in kernels/ (testable one by one); the tape only orders them.
//
// Gradients live in `Var` slots, allocated (zeroed) on first use, so a value read in several places
// collects its gradient by accumulation (kernels' backward ops add into their outputs). Parameters are Vars
// whose slots hold the persistent gradient buffers the optimizer reads.
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

  const Tensor& value() const { return value_; }
  Tensor& value() { return value_; }
  bool requires_grad() const { return slot_ != nullptr; }
  // True once something has written a gradient (or a buffer was attached).
  bool has_grad() const { return slot_ && slot_->defined(); }
  // The gradient, zero-allocated on first use; same shape, dtype and device as the value.
  Tensor& grad() {
    GPT_CHECK(slot_ != nullptr, "grad() of a Var that does not require a gradient (", value_.describe(), ")");
    if (!slot_->defined()) *slot_ = Tensor::zeros(value_.shape(), value_.dtype(), value_.device());
    return *slot_;
  }

 private:
  Tensor value_;
  std::shared_ptr<Tensor> slot_;
};

class Tape {
 public:
  using Backward = std::function<void()>;

  // While disabled (validation), push() drops closures, so no activation is kept alive.
  void set_enabled(bool enabled) { enabled_ = enabled; }
  bool enabled() const { return enabled_; }

  void push(Backward fn) {
    if (enabled_) steps_.push_back(std::move(fn));
  }
  // Runs every recorded backward in reverse order and forgets them.
  void backward() {
    for (auto it = steps_.rbegin(); it != steps_.rend(); ++it) (*it)();
    steps_.clear();
  }
  void clear() { steps_.clear(); }
  size_t size() const { return steps_.size(); }

 private:
  std::vector<Backward> steps_;
  bool enabled_ = true;
};

}  // namespace gpt
