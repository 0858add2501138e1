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
  // The name the baseline's own trainer gives `recipe`, where the recipe was renamed after it (its arm runs this name,
  // as with --baseline-recipe); empty: `recipe`.
  std::string baseline_recipe;
  std::optional<PublishedFigures> published;
};

// Parses baseline TOML; `source` names the file in errors. Keys: revision | binary, recipe, optional baseline_recipe,
// [published] runs, mean_val_loss, optional mean_train_time_s.
Baseline parse_baseline(std::string_view toml_text, std::string_view name, std::string_view source);
// Loads `<dir>/<name>.toml`; nullopt when there is no such file (the name is then a git revision).
std::optional<Baseline> find_baseline(const std::filesystem::path& dir, std::string_view name);

// One run of a sweep's launch order: its seed (as an offset from the first seed) and its arm (an index).
struct InterleavedRun {
  size_t seed_offset = 0;
  size_t arm = 0;
  bool operator==(const InterleavedRun&) const = default;
};
// Seed by seed and, within a seed, arm by arm (ABAB… for two arms), so slow drift (thermal, clocks, neighbours)
// hits every arm alike: the order in which record and compare plan their runs.
std::vector<InterleavedRun> interleaved_order(size_t arms, size_t runs_per_arm);

struct ArmResults {
  std::vector<double> train_time_s;  // finished runs only
  std::vector<double> final_val_loss;
  // The seeds of the values above (same order and length; empty: unknown). Seeds run in both arms pair up.
  std::vector<std::int64_t> time_seeds, loss_seeds;
};

struct ComparisonSettings {
  std::optional<double> target_loss;  // record check of the candidate's losses; none: no check
  double alpha = 0.01;                // every test's significance level
  double confidence = 0.95;           // bootstrap CI of the time ratio
  size_t resamples = 10000;
  uint64_t seed = 1;
  // --fail-if-slower PCT: the candidate fails when its train time is more than PCT percent above the
  // baseline's with significance alpha (see ComparisonReport::slowdown).
  std::optional<double> fail_if_slower_pct;
  std::optional<PublishedFigures> published;  // a named baseline's published figures
};

// How one metric (train time, final loss) differs between the arms. Paired when at least two seeds ran in
// both arms (the tests then use the per-seed differences candidate − baseline of those seeds), else unpaired.
struct ShiftTest {
  bool paired = false;
  size_t pairs = 0;
  stats::TTestResult t{};                                // paired t, else Welch; two-sided
  std::optional<stats::WilcoxonResult> wilcoxon;         // paired: Wilcoxon signed-rank, two-sided
  std::optional<stats::MannWhitneyResult> mann_whitney;  // unpaired: Mann–Whitney U, two-sided
  const char* t_name() const { return paired ? "paired t" : "Welch t"; }
  const char* rank_name() const { return paired ? "Wilcoxon signed-rank" : "Mann-Whitney U"; }
  double rank_p() const { return paired ? wilcoxon->p_value : mann_whitney->p_value; }
};

struct ComparisonReport {
  stats::Summary candidate_time, baseline_time;
  ShiftTest time;
  stats::Interval time_ratio_ci{};  // candidate/baseline
  double time_ratio = 0;            // ratio of means
  std::optional<stats::Summary> candidate_loss, baseline_loss;
  std::optional<ShiftTest> loss;
  std::optional<stats::TTestResult> candidate_record;  // one-sided t-test of candidate losses < target
  bool candidate_passes_record = false;
  bool faster = false;  // the time test's p < alpha and the candidate's mean time is lower
  bool slower = false;  // the time test's p < alpha and the candidate's mean time is higher
  // With fail_if_slower_pct = PCT: the one-sided test of H1 "candidate time > (1 + PCT/100) x baseline time"
  // (paired t on c_i − (1 + PCT/100)·b_i when paired, else Welch of c against (1 + PCT/100)·b);
  // too_slow when its p < alpha.
  std::optional<stats::TTestResult> slowdown;
  bool too_slow = false;
  // With published figures: a two-sided one-sample t-test of the fresh baseline losses against the published
  // mean (needs two baseline losses); drifted when its p < alpha (this machine does not reproduce the figure).
  std::optional<stats::TTestResult> published_drift;
  bool drifted = false;
};

// Needs at least two finished runs per arm for the time tests; loss tests run when both arms have
// two or more losses.
ComparisonReport analyze_comparison(const ArmResults& candidate, const ArmResults& baseline,
                                    const ComparisonSettings& settings = {});

// Terminal report (the published figures come from the settings).
// The slowdown check (--fail-if-slower) in one sentence that cannot be misread, e.g. "FAIL: the candidate is
// slower than 102% of the baseline time (one-sided paired t p = 0.0004 < alpha 0.01)"; "" when there was none.
std::string slowdown_verdict(const ComparisonReport& report, const ComparisonSettings& settings);

// The record check of the candidate (one-sided t-test of its losses below the target) in one sentence, the same in
// the terminal, Markdown and HTML reports: "PASS: the candidate's mean final val loss 6.7000 is below the target
// 7.0200 (one-sided t p = 0.0004 < alpha 0.01)" or "not established: ... is not shown below the target ..."; ""
// when there was none.
std::string record_check_verdict(const ComparisonReport& report, const ComparisonSettings& settings);

std::string format_comparison(const ComparisonReport& report, const ComparisonSettings& settings);

}  // namespace gpt::harness::compare
