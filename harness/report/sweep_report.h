#pragma once
// The record report of a sweep (used by `record` and `import`): per arm, the statistics of the final val
// losses of the ok runs against the target (one-sided one-sample t-test, upper confidence bound, runs
// needed), the train-time distribution, and every run that is not ok, listed with its reason.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/report/provenance.h"
#include "harness/stats/power.h"
#include "harness/stats/stats.h"
#include "harness/store/store.h"

namespace gpt::harness {

struct ReportOptions {
  double target = 3.28;
  double alpha = 0.01;
  bool track3 = false;  // also apply the track-3 rule (target − mean)·√n >= 0.004
  double power = 0.8;   // wanted power of the power-analysis section
};

struct ArmReport {
  std::string arm;
  std::vector<RunRecord> ok;      // with val points
  std::vector<RunRecord> not_ok;  // failed, diverged, timeout, killed, incomplete
  std::optional<stats::Summary> loss;
  std::optional<stats::Summary> time_ms;
  std::optional<stats::TTestResult> ttest;     // n >= 2
  std::optional<double> upper_bound;           // (1 − alpha) one-sided bound of the mean loss, n >= 2
  std::optional<std::size_t> runs_needed;      // for p < alpha at the observed mean and sd
  std::optional<stats::PowerPlan> power_plan;  // n >= 2: runs for the wanted power, improvement n runs prove
  std::optional<bool> track3_pass;
  std::size_t cycled_runs = 0;  // ok runs whose trainer restarted its train shards (proxy corpus): never a record
  bool pass = false;
  std::string verdict;  // one sentence saying why it passes or fails
};

struct SweepReport {
  SweepInfo sweep;
  ReportOptions options;
  int runs_planned = 0;
  int runs_stored = 0;
  std::vector<ArmReport> arms;
  bool pass = false;      // every arm passes
  Provenance provenance;  // each run's environment as its trainer reported it
};

// Every stored run of the report, ok runs first, arm by arm.
std::vector<const RunRecord*> all_runs(const SweepReport& report);

SweepReport build_sweep_report(Store& store, const SweepInfo& sweep, const ReportOptions& options);

std::string render_text(const SweepReport& report);
nlohmann::json to_json(const SweepReport& report);
std::string render_markdown(const SweepReport& report, const std::vector<std::string>& plot_files);

// Writes report.md, report.json and the SVG plots into `dir` (created); returns the Markdown path.
std::filesystem::path write_report_files(const SweepReport& report, const std::filesystem::path& dir);

}  // namespace gpt::harness
