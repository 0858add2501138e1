#include "trainer/run/debug_faults.h"

#include <signal.h>

#include <limits>
#include <vector>

#include "base/check.h"

namespace gpt {

void poison_parameters(TrainableModel& model) {
  ParameterSet& params = model.parameters();
  Tensor& value = params.contains("lm_head") ? params.get("lm_head").value : params.all().front().value;
  std::vector<double> values = value.to_doubles();
  values[0] = std::numeric_limits<double>::quiet_NaN();
  value.copy_from(Tensor::from_doubles(values, value.shape(), value.dtype(), value.device()));
}

void inject_debug_faults(const RunOptions& options, int64_t step, int rank, TrainableModel& model) {
  if (step == options.inject_nan_step) poison_parameters(model);
  if (step != options.fault_step || rank != options.fault_rank) return;
  if (options.fault_kind == "nan") poison_parameters(model);
  if (options.fault_kind == "error") GPT_FAIL("debug.fault: injected error");
  if (options.fault_kind == "kill") ::raise(SIGKILL);
}

void inject_final_validation_faults(const RunOptions& options, int64_t total, TrainableModel& model) {
  if (options.inject_nan_step == total) poison_parameters(model);
}

}  // namespace gpt
