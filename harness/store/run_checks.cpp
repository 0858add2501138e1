#include "harness/store/run_checks.h"

#include <cmath>
#include <cstdio>

namespace gpt::harness {

namespace {

std::string number_text(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

}  // namespace

std::optional<std::string> loss_problem(double loss) {
  if (std::isfinite(loss) && loss < 0) return "is negative (" + number_text(loss) + "); a cross-entropy is >= 0";
  return std::nullopt;
}

std::optional<std::string> steps_problem(std::optional<std::int64_t> step, std::optional<std::int64_t> total) {
  if (total && *total < 1) return "total steps " + std::to_string(*total) + " (expected >= 1)";
  if (step && *step < 0) return "step " + std::to_string(*step) + " (expected >= 0)";
  if (step && total && *step > *total) {
    return "step " + std::to_string(*step) + " beyond the total of " + std::to_string(*total);
  }
  return std::nullopt;
}

std::optional<std::string> ok_result_problem(const RunRecord& run) {
  if (!run.final_val_loss) return "no final val loss";
  if (!std::isfinite(*run.final_val_loss)) return "final val loss is " + number_text(*run.final_val_loss);
  if (auto p = loss_problem(*run.final_val_loss)) return "final val loss " + *p;
  if (auto p = steps_problem(run.steps, run.total_steps)) return *p;
  for (const auto& point : run.val_points) {
    if (auto p = loss_problem(point.val_loss)) return "val loss at step " + std::to_string(point.step) + " " + *p;
    if (auto p = steps_problem(point.step, run.total_steps)) return "validation at " + *p;
  }
  if (run.train_time_ms && !(*run.train_time_ms >= 0)) return "train time " + number_text(*run.train_time_ms) + " ms";
  if (run.tokens && *run.tokens < 0) return "token count " + std::to_string(*run.tokens);
  return std::nullopt;
}

void demote_unusable_result(RunRecord& run) {
  if (run.status != RunStatus::ok) return;
  if (auto problem = ok_result_problem(run)) {
    run.status = RunStatus::failed;
    run.reason = "result refused: " + *problem + (run.reason.empty() ? "" : "; " + run.reason);
  }
}

}  // namespace gpt::harness
