#include "harness/record/harvest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness/launcher/safe_files.h"
#include "harness/logparse/run_summary.h"
#include "harness/record/spool.h"
#include "base/check.h"
#include "base/file_read.h"

namespace gpt::harness {

namespace {

void fill_from_log(RunRecord& r, const ParsedLog& log) {
  r.final_val_loss =
      log.outcome == LogOutcome::complete || log.outcome == LogOutcome::diverged ? log.final_val_loss : std::nullopt;
  r.train_time_ms = log.final_train_time_ms;
  r.steps = log.final_step;
  r.total_steps = log.total_steps;
  r.peak_memory_mib = log.peak_memory_mib;
  r.val_points.clear();
  for (const auto& p : log.val_points) r.val_points.push_back({p.step, p.val_loss, p.train_time_ms});
}

std::string with_last_line(std::string reason, const std::filesystem::path& log) {
  const std::string last = last_output_line(log);
  if (!last.empty()) reason += "; last output: \"" + last + "\"";
  return reason;
}

std::string loss_text(double loss) {
  char text[40];
  std::snprintf(text, sizeof text, "%.10g", loss);
  return text;
}

// `summary_loss` printed with the log's `decimals` gives `log_loss` (half a unit of the last printed digit).
bool rounds_to(double summary_loss, double log_loss, int decimals) {
  const double half_unit = 0.5 * std::pow(10.0, -(decimals < 0 ? 4 : std::min(decimals, 15)));
  return std::fabs(summary_loss - log_loss) <= half_unit * (1 + 1e-9) + 1e-12;
}

}  // namespace

std::optional<std::string> summary_log_conflict(const ParsedLog& log, const RunSummary& s, const std::string& run_id) {
  if (!s.run_id.empty() && s.run_id != run_id) {
    return "the run summary is of run '" + s.run_id + "', not of '" + run_id + "'";
  }
  if (log.step_lines == 0) return std::nullopt;  // no log to contradict: the summary alone speaks
  if (s.total_steps && log.total_steps && *s.total_steps != *log.total_steps) {
    return "the run summary's total_steps " + std::to_string(*s.total_steps) + " differs from the log's " +
           std::to_string(*log.total_steps);
  }
  if (log.outcome != LogOutcome::complete || !log.final_val_loss) return std::nullopt;
  const std::string log_final = "the log's final validation (val_loss " + loss_text(*log.final_val_loss) + " at step " +
                                std::to_string(log.final_step.value_or(0)) + ")";
  if (s.status == "diverged" || (s.final_val_loss && !std::isfinite(*s.final_val_loss))) {
    return "the run summary says the run diverged (status '" + s.status + "', final_val_loss " +
           (s.final_val_loss ? loss_text(*s.final_val_loss) : std::string("absent")) + ") but " + log_final +
           " is finite";
  }
  if (s.final_val_loss && !rounds_to(*s.final_val_loss, *log.final_val_loss, log.final_val_loss_decimals)) {
    return "the run summary's final_val_loss " + loss_text(*s.final_val_loss) + " differs from " + log_final;
  }
  return std::nullopt;
}

void empty_run_folder(const std::filesystem::path& out_dir) {
  empty_folder(out_dir, {kRunLockFileName, kSpoolFileName});
}

std::string last_output_line(const std::filesystem::path& path, std::size_t max_chars) {
  std::string text = try_read_file(path).value_or("");
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  const auto nl = text.find_last_of('\n');
  std::string line = nl == std::string::npos ? text : text.substr(nl + 1);
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f) c = '?';
  }
  if (line.size() > max_chars) line = line.substr(0, max_chars) + "...";
  return line;
}

void apply_run_summary(RunRecord& r, const RunSummary& s, std::optional<std::int64_t> early_stop_step) {
  // A summary's final loss counts only at the end of the run: a trainer cut short may still have written one.
  const bool at_end = s.steps && s.total_steps && (*s.steps == *s.total_steps || early_stop_step == *s.steps);
  if (s.final_val_loss && (at_end || !std::isfinite(*s.final_val_loss))) r.final_val_loss = s.final_val_loss;
  if (s.train_time_ms) r.train_time_ms = s.train_time_ms;
  if (s.steps) r.steps = s.steps;
  if (s.total_steps) r.total_steps = s.total_steps;
  if (s.tokens) r.tokens = s.tokens;
  if (s.peak_memory_mib) r.peak_memory_mib = s.peak_memory_mib;
  if (r.val_points.empty()) {
    for (const auto& p : s.val_history) r.val_points.push_back({p.step, p.val_loss, p.train_time_ms});
  }
  if (s.environment) r.environment = s.environment;
  if (!s.recipe.empty()) r.params["recipe"] = s.recipe;
  if (!s.recipe_hash.empty()) r.params["recipe_hash"] = s.recipe_hash;
  if (s.world_size) r.params["world_size"] = std::to_string(*s.world_size);
  if (!s.backend.empty()) r.params["backend"] = s.backend;
  // A std::string, not a literal: GCC 12's -O3 -Wrestrict misfires on assigning a short literal (a Release
  // build is -Werror).
  if (s.train_data_cycled) r.params["train_data_cycled"] = std::string("1");
  if (s.train_data_passes) r.params["train_data_passes"] = std::to_string(*s.train_data_passes);
  if (s.environment && !s.environment->git_commit.empty()) r.params["trainer_commit"] = s.environment->git_commit;
  if (!s.gpu_uuid.empty()) r.params["gpu_uuid"] = s.gpu_uuid;
  if (!s.gpu_clocks.empty()) r.params["gpu_clocks"] = s.gpu_clocks;
  if (!s.gpu_power_limit.empty()) r.params["gpu_power_limit"] = s.gpu_power_limit;
  if (s.threads) r.params["threads"] = std::to_string(*s.threads);
}

RunRecord record_from_log(const ParsedLog& log, const std::filesystem::path& log_path) {
  RunRecord r;
  r.log_path = log_path.string();
  fill_from_log(r, log);
  switch (log.outcome) {
    case LogOutcome::complete:
      r.status = RunStatus::ok;
      break;
    case LogOutcome::diverged:
      r.status = RunStatus::diverged;
      break;
    case LogOutcome::incomplete:
      r.status = RunStatus::incomplete;
      break;
    case LogOutcome::invalid:
      r.status = RunStatus::failed;
      break;
  }
  r.reason = log.reason;
  return r;
}

RunRecord harvest_run(const RunPlan& plan, const ExitInfo& exit, RunEnd end, std::optional<double> timeout_s) {
  RunRecord r;
  r.arm = plan.arm;
  r.seed = plan.seed;
  r.run_id = plan.run_id;
  r.log_path = plan.log_path.string();
  r.wall_time_s = exit.wall_time_s;
  r.params = plan.params;
  if (exit.exited) r.exit_code = exit.exit_code;

  // The console log is what we captured; the trainer's own OUT/ID.txt is the fallback for foreign
  // launchers that write the log only to a file.
  const LogParseOptions parse_options{plan.early_stop_step};
  std::vector<ParsedLog> runs;
  try {
    runs = parse_log_file(plan.log_path, parse_options);
  } catch (const gpt::Error&) {
    runs = parse_log("");
  }
  ParsedLog log = runs.back();
  const auto own_log = plan.out_dir / (plan.run_id + ".txt");
  if (log.step_lines == 0 && std::filesystem::exists(own_log)) {
    log = parse_log_file(own_log, parse_options).back();
  }
  fill_from_log(r, log);

  std::string summary_problem;
  std::optional<std::string> conflict;  // the summary contradicts the log
  bool summary_complete = false;        // the summary holds a finite final loss at the end of the run
  const auto summary_path = plan.out_dir / (plan.run_id + ".json");
  const bool summary_written = std::filesystem::exists(summary_path);
  if (summary_written) {
    try {
      const RunSummary summary = read_run_summary(summary_path);
      conflict = summary_log_conflict(log, summary, plan.run_id);
      apply_run_summary(r, summary, plan.early_stop_step);
      summary_complete = summary.final_val_loss && std::isfinite(*summary.final_val_loss) && summary.steps &&
                         summary.total_steps &&
                         (*summary.steps == *summary.total_steps || plan.early_stop_step == *summary.steps);
    } catch (const gpt::Error& e) {
      summary_problem = std::string("; ignored the run summary: ") + e.what();
    }
  }

  const bool finite_result = r.final_val_loss && std::isfinite(*r.final_val_loss);
  if (end == RunEnd::timed_out) {
    r.status = RunStatus::timeout;
    r.reason = "no exit within the " + (timeout_s ? std::to_string(static_cast<long long>(*timeout_s)) + " s " : "") +
               "timeout; process group killed (" + exit.describe() + ")";
  } else if (end == RunEnd::interrupted) {
    r.status = RunStatus::killed;
    r.reason = "interrupted by the user; process group killed";
  } else if (!exit.exited) {
    r.status = RunStatus::failed;
    r.reason = with_last_line("crashed: " + exit.describe(), plan.log_path);
  } else if (exit.exit_code == 0 && (conflict || log.outcome == LogOutcome::invalid)) {
    r.status = RunStatus::failed;
    r.reason = conflict ? *conflict : log.reason;
  } else if (exit.exit_code == 3 || log.outcome == LogOutcome::diverged ||
             (exit.exit_code == 0 && r.final_val_loss && !finite_result)) {
    r.status = RunStatus::diverged;
    r.reason = log.reason.empty() ? "trainer reported divergence (exit code 3)" : log.reason;
  } else if (exit.exit_code == 2) {
    r.status = RunStatus::failed;
    r.reason = with_last_line("trainer rejected its input (exit code 2)", plan.log_path);
  } else if (exit.exit_code != 0) {
    r.status = RunStatus::failed;
    r.reason = with_last_line("trainer failed (" + exit.describe() + ")", plan.log_path);
  } else if (log.step_lines == 0 && !summary_written) {
    // Nothing of this run's own to judge: a result read from elsewhere would be another run's.
    r.status = RunStatus::failed;
    r.reason = with_last_line("exited 0 but wrote no result: no step lines in its output ('" +
                                  plan.log_path.filename().string() + "') or in '" + own_log.filename().string() +
                                  "', and no summary '" + summary_path.filename().string() + "'",
                              plan.log_path);
  } else if ((log.outcome == LogOutcome::complete || summary_complete) && finite_result) {
    r.status = RunStatus::ok;
  } else {
    r.status = RunStatus::incomplete;
    r.reason = with_last_line("exited 0 but " + log.reason, plan.log_path);
  }
  r.reason += summary_problem;
  return r;
}

}  // namespace gpt::harness
