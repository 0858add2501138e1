#pragma once
// Nightly regression logic, kept free of I/O so it can be calibrated on synthetic histories: Google
// Benchmark JSON parsing (units normalised to nanoseconds) and the decision over all benchmarks of a night.
//
// Per benchmark (values: larger is worse), on the night means of its stored history:
//  - new-night test: is the newest night above its history? A one-sided t-test for one new observation
//    against the previous `window` nights (prediction interval: t = (x − m) / (s·√(1 + 1/n)), df n − 1), so
//    the night-to-night noise of that benchmark sets the scale; the same for the mean of the k newest nights
//    against the nights before them, k = 2 .. recent_nights + 1 (a small step gathers evidence night by night:
//    the mean of k nights has 1/√k of one night's noise);
//  - change points: E-divisive over the window; a recent change point to slower values is tested with
//    Welch's t (one-sided) between the night means before and after it.
// Every p-value of the night, of both kinds and all benchmarks, goes through ONE Benjamini–Hochberg
// procedure at `fdr`. A regression is confirmed when its test is rejected AND its relative slowdown is at
// least the benchmark's minimum effect: max(min_relative_change, noise_factor × the history's night-to-night
// coefficient of variation, estimated from the median successive difference so a step does not inflate it).
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpt::harness::nightly {

// One repetition of one benchmark from `--benchmark_format=json` output (run_type "iteration"; the
// mean/median/stddev aggregates are skipped because the repetitions themselves are stored).
struct BenchmarkSample {
  std::string name;  // run_name (without the /repeats suffix)
  double real_time = 0;
  std::string time_unit;  // "ns", "us", "ms", "s"
  // The entry's own "executable" (a key the project adds where one file merges several programs, as a device
  // call's results/benchmarks file does): the program, hence the suite, this entry belongs to. Empty when absent.
  std::string executable;
};

// The `context` block of a Google Benchmark JSON file: when, where and (a key the project adds) at which commit.
struct BenchmarkContext {
  std::string date;  // as written, e.g. "2026-12-05T02:00:11+00:00"
  std::string host_name;
  std::string git_commit;  // empty when absent
  std::string executable;
  std::string gpu, driver;  // keys scripts/gpu-session adds; empty when absent
};

struct BenchmarkRun {
  BenchmarkContext context;
  std::vector<BenchmarkSample> samples;
};

// The longest time per iteration a benchmark entry may report: about 11.6 days, far beyond any benchmark, so a
// value above it is a corrupt file or a unit mix-up, refused at the parse rather than stored.
inline constexpr double kMaxBenchmarkNs = 1e15;

// `source` names the input in error messages. Throws gpt::Error for text that is not Google Benchmark JSON
// (no "benchmarks" array) or an entry without a name, a numeric real_time or a known time unit, or whose time is
// not finite, negative or above kMaxBenchmarkNs once in nanoseconds.
std::vector<BenchmarkSample> parse_google_benchmark_json(std::string_view json_text, std::string_view source);
BenchmarkRun parse_google_benchmark_run(std::string_view json_text, std::string_view source);

// `value` in `unit` ("ns", "us", "ms", "s") as nanoseconds; throws for another unit.
double to_nanoseconds(double value, std::string_view unit, std::string_view source = "benchmark");

// A benchmark's stored history: one entry per night, oldest first, each holding that night's repetitions.
struct BenchmarkHistory {
  std::string name;
  std::vector<std::vector<double>> nights;
  // The first night of the level the tests compare against: the nights before it end at a change point that
  // was already reported (change_point_tracking.h), so it is not found again on every later night.
  size_t level_start = 0;
  std::vector<std::string> night_stamps{}, night_commits{};  // per night, where known (nightly --ingest, the store)
};

// "2026-12-05 02:00 UTC (bffc9f5)" for a night stamp ("2026-12-05T02:00:11Z") and the commit it measured.
std::string night_label(const std::string& stamp, const std::string& commit);
// The label of night `index` of `history`: its date and commit where known, else "night N".
std::string night_label(const BenchmarkHistory& history, size_t index);

// The p-value of a test that did not run (too little history, no recent change point): printed as "not tested",
// never as a p-value.
inline constexpr double kNotTested = std::numeric_limits<double>::quiet_NaN();

struct RegressionOptions {
  double fdr = 0.002;                 // Benjamini–Hochberg q over every p-value of the night
  double min_relative_change = 0.02;  // floor of every benchmark's minimum effect
  double noise_factor = 1.0;          // minimum effect >= noise_factor × night-to-night CV
  size_t min_history = 5;             // nights before the newest needed for the new-night test
  size_t window = 30;                 // nights of history used (the newest included)
  double alpha = 0.05;                // E-divisive permutation significance
  size_t permutations = 199;
  uint64_t seed = 1;
  size_t min_size = 3;       // nights per E-divisive segment
  size_t recent_nights = 3;  // a change point this close to the newest night is tested
};

struct RegressionFinding {
  std::string name;
  size_t nights = 0;
  double latest_mean = 0;
  double baseline_mean = 0;         // mean of the history nights (NaN when there are none)
  double noise_cv = 0;              // night-to-night coefficient of variation of the history (NaN when unknown)
  double min_effect = 0;            // the smallest relative slowdown this benchmark may flag
  double relative = 0;              // (latest − baseline) / baseline
  double new_night_p = kNotTested;  // one-sided; kNotTested (NaN) when the history is too short
  // The mean of the k newest nights against the nights before them, for each k tested (2 .. recent_nights + 1).
  struct RecentNights {
    size_t nights = 0;
    double relative = 0;
    double p = 1.0;
  };
  std::vector<RecentNights> recent;
  std::vector<size_t> change_points;  // night indices (of the whole history) where a segment starts
  double change_relative = 0;         // (after − before) / before at the most recent change point
  double change_p = kNotTested;       // one-sided Welch p at that change point; kNotTested when none is recent
  bool new_night_regression = false;
  bool change_point_regression = false;
  size_t regression_start = 0;         // when regression(): the first night of the slower level
  std::string regression_start_label;  // that night's date and commit (night_label)
  std::string note;                    // why a test was not possible (too little history)
  bool regression() const { return new_night_regression || change_point_regression; }
};

std::vector<RegressionFinding> detect_regressions(const std::vector<BenchmarkHistory>& histories,
                                                  const RegressionOptions& options = {});

// Readable multi-line summary of the findings (one line per benchmark, regressions marked; a change point is
// named only when it is tonight's finding).
std::string format_findings(const std::vector<RegressionFinding>& findings);

}  // namespace gpt::harness::nightly
