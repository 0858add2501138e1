#pragma once
// The pieces of a nightly run that touch the outside world, kept apart from the command so they can be
// tested: finding the benchmark programs (CTest label `bench`, or a manifest), turning Google Benchmark
// dates into night stamps, and the Markdown report with a plot per flagged benchmark.
#include <filesystem>
#include <string>
#include <vector>

#include "harness/nightly/regression.h"
#include "harness/store/change_points.h"

namespace gpt::harness::nightly {

struct BenchProgram {
  std::string suite;              // the program's name: the suite its benchmarks are stored under
  std::vector<std::string> argv;  // the command CTest (or the manifest) gives
};

// The tests labelled `bench` in `build_dir` (`ctest --show-only=json-v1 -L bench`, without those also
// labelled `gpu` unless `include_gpu`). `ctest_json` is that command's output.
std::vector<BenchProgram> bench_programs_from_ctest_json(const std::string& ctest_json, bool include_gpu);

// A manifest: one program per line (path relative to the manifest's folder, or absolute; arguments after
// it separated by spaces); blank lines and `#` comments skipped.
std::vector<BenchProgram> bench_programs_from_manifest(const std::filesystem::path& manifest);

// Google Benchmark's context.date ("2026-12-05T02:00:11+01:00", "2026-12-05 02:00:11") as the UTC night
// stamp "2026-12-05T01:00:11Z"; throws naming `source` for another form.
std::string utc_stamp_from_benchmark_date(const std::string& date, const std::string& source);

struct NightFailure {
  std::string suite;
  std::string reason;
};

struct NightReport {
  std::string night;     // UTC stamp
  std::string revision;  // git commit measured (may be empty)
  std::vector<RegressionFinding> findings;
  std::vector<BenchmarkHistory> histories;  // same order as findings (for the plots)
  std::vector<NightFailure> failures;       // programs that failed or were skipped, with why
  std::vector<std::string> notes;           // e.g. the smoke run's status
  std::vector<ChangePointRecord> found;     // change points first reported tonight
  std::vector<ChangePointRecord> tracked;   // every tracked change point of the benchmarks measured
};

// The change-point lines of the console report: those found tonight, then the ones still tracked.
std::string format_change_points(const NightReport& report);

// Writes report.md (and one SVG per flagged benchmark) into `dir`; returns the Markdown path.
std::filesystem::path write_night_report(const NightReport& report, const std::filesystem::path& dir);

}  // namespace gpt::harness::nightly
