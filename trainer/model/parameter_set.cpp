#include "trainer/model/parameter_set.h"

namespace gpt {

Parameter& ParameterSet::add(const std::string& name, Tensor value, ParamKind kind) {
  GPT_CHECK(!contains(name), "ParameterSet: parameter '", name, "' registered twice");
  GPT_CHECK(value.defined() && is_floating(value.dtype()), "ParameterSet: parameter '", name,
            "' must be a floating tensor");
  if (kind == ParamKind::bank) {
    GPT_CHECK(value.ndim() >= 3, "ParameterSet: bank '", name, "' must be a stack [..., rows, cols], got ",
              value.describe());
  }
  Parameter p;
  p.name = name;
  p.grad = Tensor::zeros(value.shape(), value.dtype(), value.device());
  p.value = std::move(value);
  p.kind = kind;
  params_.push_back(std::move(p));
  return params_.back();
}

Parameter& ParameterSet::get(const std::string& name) {
  for (Parameter& p : params_) {
    if (p.name == name) return p;
  }
  GPT_FAIL("ParameterSet: no parameter named '", name, "'");
}

const Parameter& ParameterSet::get(const std::string& name) const {
  for (const Parameter& p : params_) {
    if (p.name == name) return p;
  }
  GPT_FAIL("ParameterSet: no parameter named '", name, "'");
}

bool ParameterSet::contains(const std::string& name) const {
  for (const Parameter& p : params_) {
    if (p.name == name) return true;
  }
  return false;
}

void ParameterSet::zero_grads() {
  for (Parameter& p : params_) p.grad.zero_();
}

}  // namespace gpt
