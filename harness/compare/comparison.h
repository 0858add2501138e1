#pragma once
// Branch-vs-baseline comparison: named baselines (baselines/<name>.toml), the interleaved run order,
// and the statistical verdict on train time and final loss. Free of process handling so it is testable.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/stats/stats.h"

namespace gpt::harness::compare {

// Reference figures published with a baseline (e.g. the current record's write-up).
struct PublishedFigures {
  int runs = 0;
  double mean_val_loss = 0;
  std::optional<double> mean_train_time_s;  // not every write-up states one
};

// A named baseline: exactly one of `revision` (a git revision built like any other) or `binary`
// (a prebuilt trainer), the recipe it runs, and optional published figures.
struct Baseline {
  std::string name;
  std::string revision;
  std::string binary;
  std::string recipe;
  std::optional<PublishedFigures> published;
};

// Parses baseline TOML; `source` names the file in errors. Keys: revision | binary, recipe,
// [published] runs, mean_val_loss, optional mean_train_time_s.
Baseline parse_baseline(std::string_view toml_text, std::string_view name, std::string_view source);
// Loads `<dir>/<name>.toml`; nullopt when there is no such file (the name is then a git revision).
std::optional<Baseline> find_baseline(const std::filesystem::path& dir, std::string_view name);

enum class Arm { baseline, candidate };
std::string_view to_string(Arm arm);

// ABAB… order so slow drift (thermal, clocks, neighbours) hits both arms alike.
std::vector<Arm> interleaved_order(size_t runs_per_arm);

struct ArmResults {
  std::vector<double> train_time_s;  // finished runs only
  std::vector<double> final_val_loss;
};

struct ComparisonSettings {
  double target_loss = 3.28;
  double alpha = 0.01;        // record check and the "significant" label
  double confidence = 0.95;   // bootstrap CI of the time ratio
  size_t resamples = 10000;
  uint64_t seed = 1;
};

struct ComparisonReport {
  stats::Summary candidate_time, baseline_time;
  stats::TTestResult time_welch;
  stats::MannWhitneyResult time_mann_whitney;
  stats::Interval time_ratio_ci;  // candidate/baseline
  double time_ratio = 0;          // ratio of means
  std::optional<stats::Summary> candidate_loss, baseline_loss;
  std::optional<stats::TTestResult> loss_welch;
  std::optional<stats::TTestResult> candidate_record;  // one-sided t-test of candidate losses < target
  bool candidate_passes_record = false;
  bool faster = false;  // Welch p < alpha and candidate mean time lower
};

// Needs at least two finished runs per arm for the time tests; loss tests run when both arms have
// two or more losses.
ComparisonReport analyze_comparison(const ArmResults& candidate, const ArmResults& baseline,
                                    const ComparisonSettings& settings = {});

// Terminal report; `published` adds the baseline's reference figures for context.
std::string format_comparison(const ComparisonReport& report, const ComparisonSettings& settings,
                              const std::optional<PublishedFigures>& published = std::nullopt);

}  // namespace gpt::harness::compare
