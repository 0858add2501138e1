#include "trainer/run/training_state.h"

#include <cstring>
#include <unordered_map>

namespace gpt {

std::vector<NamedTensor> collect_state(TrainableModel& model, const Optimizer& optimizer) {
  std::vector<NamedTensor> out;
  for (const Parameter& p : model.parameters().all()) out.push_back({"param/" + p.name, p.value});
  for (const Parameter& p : model.parameters().all()) out.push_back({"grad/" + p.name, p.grad});
  for (NamedTensor& b : model.buffers()) out.push_back({"buffer/" + b.name, b.tensor});
  for (const Parameter& p : model.parameters().all()) {
    if (p.kind == ParamKind::adam) {
      const Optimizer::AdamState& s = optimizer.adam_state(p.name);
      out.push_back({"adam/" + p.name + "/m", s.m});
      out.push_back({"adam/" + p.name + "/v", s.v});
    } else if (optimizer.bank_optimizer() == Optimizer::BankOptimizer::anvil) {
      const AnvilState& s = optimizer.anvil_state(p.name);
      out.push_back({"bank/" + p.name + "/fast_rail", s.fast_rail});
      out.push_back({"bank/" + p.name + "/slow_rail", s.slow_rail});
      out.push_back({"bank/" + p.name + "/second_moment", s.second_moment});
      if (s.mantissa.defined()) out.push_back({"bank/" + p.name + "/mantissa", s.mantissa});
    } else {
      const NorMuonState& s = optimizer.bank_state(p.name);
      out.push_back({"bank/" + p.name + "/momentum", s.momentum});
      out.push_back({"bank/" + p.name + "/second_moment", s.second_moment});
      if (s.mantissa.defined()) out.push_back({"bank/" + p.name + "/mantissa", s.mantissa});
    }
  }
  return out;
}

std::vector<NamedTensor> clone_state(const std::vector<NamedTensor>& state) {
  std::vector<NamedTensor> out;
  out.reserve(state.size());
  for (const NamedTensor& t : state) out.push_back({t.name, t.tensor.clone()});
  return out;
}

void restore_state(const std::vector<NamedTensor>& live, const std::vector<NamedTensor>& saved,
                   const std::string& what) {
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const NamedTensor& t : saved) {
    GPT_CHECK(by_name.emplace(t.name, &t.tensor).second, what, ": tensor '", t.name, "' appears twice");
  }
  GPT_CHECK(saved.size() == live.size(), what, ": holds ", saved.size(), " state tensors, the run has ", live.size());
  for (const NamedTensor& t : live) {
    auto it = by_name.find(t.name);
    GPT_CHECK(it != by_name.end(), what, ": state tensor '", t.name, "' is missing");
    const Tensor& src = *it->second;
    GPT_CHECK(src.shape() == t.tensor.shape() && src.dtype() == t.tensor.dtype(), what, ": tensor '", t.name, "' is ",
              src.describe(), ", the run expects ", t.tensor.describe());
    Tensor dst = t.tensor;  // shares storage with the live tensor
    dst.copy_from(src);
  }
}

std::string first_difference(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  if (a.size() != b.size()) return "(state sizes differ)";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name) return a[i].name;
    const Tensor ha = a[i].tensor.to(Device::cpu), hb = b[i].tensor.to(Device::cpu);
    if (ha.shape() != hb.shape() || ha.dtype() != hb.dtype()) return a[i].name;
    if (std::memcmp(ha.raw(), hb.raw(), ha.nbytes()) != 0) return a[i].name;
  }
  return "";
}

OptimizerCounters read_counters(TrainableModel& model, const Optimizer& optimizer) {
  OptimizerCounters c;
  for (const Parameter& p : model.parameters().all()) {
    if (p.kind == ParamKind::adam) c.adam_steps[p.name] = optimizer.adam_state(p.name).steps;
  }
  c.tied = optimizer.tied();
  return c;
}

}  // namespace gpt
