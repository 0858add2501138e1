#pragma once
// Nightly regression logic, kept free of I/O so it can be tested on synthetic histories:
// Google Benchmark JSON parsing and the per-benchmark decision (E-divisive over the stored history
// plus latest-vs-previous Welch with Benjamini–Hochberg across benchmarks).
#include <cstdint>
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
};
// `source` names the input in error messages.
std::vector<BenchmarkSample> parse_google_benchmark_json(std::string_view json_text, std::string_view source);

// A benchmark's stored history: one entry per nightly, oldest first, each holding that night's
// repetitions. Larger values are worse (times).
struct BenchmarkHistory {
  std::string name;
  std::vector<std::vector<double>> nights;
};

struct RegressionOptions {
  double alpha = 0.05;          // E-divisive permutation significance
  size_t permutations = 199;
  uint64_t seed = 1;
  size_t min_size = 3;          // nightlies per E-divisive segment
  size_t recent_nights = 5;     // a change point this close to the newest night is "new"
  double fdr = 0.05;            // Benjamini–Hochberg q across benchmarks (latest vs previous)
  double min_relative_change = 0.01;  // ignore statistically significant but tiny shifts
};

struct RegressionFinding {
  std::string name;
  size_t nights = 0;
  double latest_mean = 0, previous_mean = 0;  // NaN when there is no previous night
  double welch_p = 1.0;                        // latest vs previous, two-sided; 1 when not testable
  bool welch_regression = false;               // BH-rejected and slower by >= min_relative_change
  bool change_point_regression = false;        // a recent E-divisive change point to slower values
  std::vector<size_t> change_points;           // night indices where a new segment starts
  double change_relative = 0;                  // (after − before)/before at the most recent change point
  bool regression() const { return welch_regression || change_point_regression; }
};

std::vector<RegressionFinding> detect_regressions(const std::vector<BenchmarkHistory>& histories,
                                                  const RegressionOptions& options = {});

// Readable multi-line summary of the findings (one line per benchmark, regressions marked).
std::string format_findings(const std::vector<RegressionFinding>& findings);

}  // namespace gpt::harness::nightly
