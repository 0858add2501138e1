#pragma once
// The trainable parameters as the optimizer sees them: name → value and gradient tensors plus the optimizer
// kind. The model registers its parameters here (RECIPE §2.2); backward ops add into `grad`.
#include <deque>
#include <string>
#include <vector>

#include "kernels/tensor.h"

namespace gpt {

enum class ParamKind {
  bank,  // a stack of matrices [..., rows, cols] updated by NorMuon (qk_bank, vo_bank, mlp_bank)
  adam,  // everything else (§4.5 groups, by name)
};

struct Parameter {
  std::string name;
  Tensor value;  // full replica on every rank
  Tensor grad;   // same shape and dtype as value
  ParamKind kind = ParamKind::adam;
};

class ParameterSet {
 public:
  // Registers a parameter and allocates its zeroed gradient; names are unique. References stay valid.
  Parameter& add(const std::string& name, Tensor value, ParamKind kind);
  Parameter& get(const std::string& name);
  const Parameter& get(const std::string& name) const;
  bool contains(const std::string& name) const;
  std::deque<Parameter>& all() { return params_; }
  const std::deque<Parameter>& all() const { return params_; }
  void zero_grads();

 private:
  std::deque<Parameter> params_;  // registration order = the order of every collective on every rank
};

}  // namespace gpt
