// End-to-end tests of `harness nightly`: benchmark programs run in isolation (a failing or foreign program
// is noted and the night goes on), and `--ingest` of Google Benchmark JSON made elsewhere (one night per
// file, dated from its context, units normalised, one decision and a report).
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/harness/child_probe.h"
#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

std::string gbench_json(const std::string& date, const std::string& unit, double value, const std::string& commit) {
  nlohmann::json benchmarks = nlohmann::json::array();
  for (int rep = 0; rep < 5; ++rep) {
    const double jitter = 1.0 + 0.002 * (rep - 2);
    benchmarks.push_back({{"name", "BM_Gemm/512/repeats:5"},
                          {"run_name", "BM_Gemm/512"},
                          {"run_type", "iteration"},
                          {"real_time", value * jitter},
                          {"cpu_time", value},
                          {"time_unit", unit}});
    benchmarks.push_back({{"name", "BM_Norm/64/repeats:5"},
                          {"run_name", "BM_Norm/64"},
                          {"run_type", "iteration"},
                          {"real_time", 2000.0 * jitter},
                          {"cpu_time", 2000.0},
                          {"time_unit", "ns"}});
  }
  nlohmann::json context = {{"date", date}, {"host_name", "gpu-box-7"}, {"executable", "./gemm_bench"}};
  if (!commit.empty()) context["git_commit"] = commit;
  return nlohmann::json{{"context", context}, {"benchmarks", benchmarks}}.dump();
}

std::string day(int d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "2026-11-%02dT03:00:00+01:00", d);
  return buf;
}

TEST_F(RecordE2E, NightlyIngestDatesNightsFromTheContextAndNormalisesUnits) {
  std::vector<std::string> args = {"nightly"};
  for (int d = 1; d <= 8; ++d) {
    // Night 5 reports the same times in microseconds: no change once normalised.
    const bool in_us = d == 5;
    const std::string file = "gb/night" + std::to_string(d) + ".json";
    dir.write(file, gbench_json(day(d), in_us ? "us" : "ns",
                                in_us ? 10.0 * (1 + 0.001 * (d % 3)) : 10000.0 * (1 + 0.001 * (d % 3)),
                                "c0ffee" + std::to_string(d)));
    args.insert(args.end(), {"--ingest", (dir / file).string()});
  }
  const Result quiet = harness(args);
  EXPECT_EQ(quiet.code, 0) << quiet.output;
  EXPECT_NE(quiet.output.find("0 confirmed regression(s) in 2 benchmark(s)"), std::string::npos) << quiet.output;
  Store store = Store::open(db());
  const auto h = store.benchmark_history("gemm_bench/BM_Gemm/512");
  ASSERT_EQ(h.size(), 40u);
  EXPECT_EQ(h.front().recorded_at, "2026-11-01T02:00:00Z");  // +01:00 converted to UTC
  EXPECT_EQ(h.front().unit, "ns");
  EXPECT_NEAR(h[20].value, 10000.0 * 1.002 * 0.996, 1e-6);  // night 5, first repetition, from us
  EXPECT_EQ(h.back().revision, "c0ffee8");
  EXPECT_EQ(store.environment(*h.back().environment_id)->hostname, "gpu-box-7");

  // A 10% slower night is a confirmed regression: exit 1, a report with its plot.
  dir.write("gb/night9.json", gbench_json(day(9), "ns", 11000.0, ""));
  dir.write("gb/broken.json", "{\"context\": {}, \"benchmarks\": [ {\"name\": 1} ]}");
  const Result slow = harness(
      {"nightly", "--ingest", (dir / "gb/night9.json").string(), "--ingest", (dir / "gb/broken.json").string()});
  EXPECT_EQ(slow.code, 1) << slow.output;
  EXPECT_NE(slow.output.find("REGRESSION gemm_bench/BM_Gemm/512"), std::string::npos) << slow.output;
  EXPECT_NE(slow.output.find("broken.json"), std::string::npos) << slow.output;  // noted, not fatal
  const auto report = dir / "reports" / "nightly" / "ingest-2026-11-09T02:00:00Z";
  EXPECT_NE(read_file(report / "report.md").find("**REGRESSION**"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(report / "gemm_bench_BM_Gemm_512.svg"));
}

// A Google Benchmark program in miniature: writes one night of BM_Gemm/BM_Norm to --benchmark_out.
std::string good_bench_body() {
  return "for a in \"$@\"; do case $a in --benchmark_out=*) out=${a#--benchmark_out=};; esac; done\n"
         "printf '%s' '" +
         gbench_json(day(1), "us", 12.0, "") + "' > \"$out\"\n";
}

TEST_F(RecordE2E, NightlyRunsEachBenchmarkProgramInIsolation) {
  dir.write("bench/good_bench", "#!/bin/sh\n" + good_bench_body());
  dir.write("bench/foreign_bench", "#!/bin/sh\necho 'not a Google Benchmark program'\n");
  dir.write("bench/crashing_bench", "#!/bin/sh\nkill -SEGV $$\n");
  dir.write("bench/garbled_bench",
            "#!/bin/sh\nfor a in \"$@\"; do case $a in --benchmark_out=*) out=${a#--benchmark_out=};; esac; done\n"
            "echo '{\"benchmarks\": [' > \"$out\"\n");
  for (const char* p : {"bench/good_bench", "bench/foreign_bench", "bench/crashing_bench", "bench/garbled_bench"}) {
    ::chmod((dir / p).c_str(), 0755);
  }
  dir.write("bench/manifest.txt",
            "# programs of this test\ncrashing_bench\nforeign_bench\ngarbled_bench\ngood_bench\n");
  const Result r =
      harness({"nightly", "--no-build", "--no-smoke", "--manifest", (dir / "bench/manifest.txt").string()});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("failed or skipped: crashing_bench: signal 11"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed or skipped: foreign_bench: skipped: wrote no Google Benchmark JSON"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("failed or skipped: garbled_bench"), std::string::npos) << r.output;
  Store store = Store::open(db());
  const auto h = store.benchmark_history("good_bench/BM_Gemm/512");
  ASSERT_EQ(h.size(), 5u);
  EXPECT_NEAR(h[2].value, 12000.0, 1e-9);  // stored in ns
  const auto sweeps = store.sweeps();
  ASSERT_EQ(sweeps.size(), 1u);
  EXPECT_EQ(store.params(OwnerKind::sweep, sweeps[0].id).count("failed:crashing_bench"), 1u);
}

// The one folder below `root` (a night's stamp), or an empty path.
std::filesystem::path only_subfolder(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) found.push_back(entry.path());
  return found.size() == 1 ? found.front() : std::filesystem::path();
}

TEST_F(RecordE2E, NightlyKillsAHungBenchmarkProgramWithItsGroupAndGoesOn) {
  script("bench/good_bench", good_bench_body());
  const auto hung = script("bench/hung_bench", hang_body(dir / "hung_child.pid"));
  dir.write("bench/manifest.txt", "hung_bench\ngood_bench\n");
  const auto started = std::chrono::steady_clock::now();
  const Result r = harness({"nightly", "--no-build", "--no-smoke", "--manifest", (dir / "bench/manifest.txt").string(),
                            "--bench-timeout", "1"});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_LT(seconds, 30.0);
  const std::string failure = "failed or skipped: hung_bench: '" + hung.string() + " --benchmark_out=";
  EXPECT_NE(r.output.find(failure), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("' did not finish within 1 s (--bench-timeout): its process group was killed; its output "
                          "is in "),
            std::string::npos)
      << r.output;
  const pid_t child = testing::read_pid(dir / "hung_child.pid");
  ASSERT_GT(child, 0);
  EXPECT_TRUE(testing::ends_within(child, std::chrono::seconds(5))) << "the hung program's child outlived the night";
  Store store = Store::open(db());
  EXPECT_EQ(store.benchmark_history("good_bench/BM_Gemm/512").size(), 5u);  // the night went on
}

TEST_F(RecordE2E, NightlyKillsAHungBuildStepAndNamesItsLimitAndLog) {
  const auto fake = dir / "fakebin";
  script("fakebin/cmake", hang_body(dir / "cmake_child.pid", "configuring"));
  dir.write("bench/manifest.txt", "# nothing\n");
  const Result r = harness({"nightly", "--build-dir", (dir / "build").string(), "--build-timeout", "1", "--no-smoke",
                            "--manifest", (dir / "bench/manifest.txt").string()},
                           {path_with(fake)});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("harness: error: 'cmake -S "), std::string::npos) << r.output;
  const std::string limit = " -B " + (dir / "build").string() +
                            " -DCMAKE_BUILD_TYPE=Release' did not finish within 1 s "
                            "(--build-timeout): its process group was killed; its output is in ";
  EXPECT_NE(r.output.find(limit), std::string::npos) << r.output;
  const auto night = only_subfolder(dir / "runs" / "nightly");
  ASSERT_FALSE(night.empty()) << "no night folder under the database's folder";
  EXPECT_NE(r.output.find((night / "build.log").string()), std::string::npos) << r.output;
  EXPECT_EQ(read_file(night / "build.log"), "configuring\n");
  const pid_t child = testing::read_pid(dir / "cmake_child.pid");
  ASSERT_GT(child, 0);
  EXPECT_TRUE(testing::ends_within(child, std::chrono::seconds(5))) << "the hung build's child outlived the harness";
}

// Without --db, nightly takes $SPEEDRUN_DB as every command does, and everything of the night (benchmark JSON and
// logs, the smoke run, the report) goes below that database's folder.
TEST_F(RecordE2E, NightlyWritesEverythingUnderTheDatabaseFolder) {
  script("bench/good_bench", good_bench_body());
  dir.write("bench/manifest.txt", "good_bench\n");
  script("fakebuild/bin/train_gpt", "exec " + kBin + "synthetic_trainer --mean 3.3 \"$@\"\n");
  const auto store_dir = dir / "store";
  const Result r = harness_without_db(
      {"nightly", "--no-build", "--build-dir", (dir / "fakebuild").string(), "--data", dir.path().string(),
       "--manifest", (dir / "bench/manifest.txt").string(), "--db-timeout", "2000"},
      {{"SPEEDRUN_DB", (store_dir / "night.db").string()}});
  ASSERT_EQ(r.code, 0) << r.output;
  const auto night = only_subfolder(store_dir / "runs" / "nightly");
  ASSERT_FALSE(night.empty()) << r.output;
  EXPECT_TRUE(std::filesystem::exists(night / "good_bench.json"));
  EXPECT_TRUE(std::filesystem::exists(night / "good_bench.log"));
  EXPECT_NE(read_file(night / "smoke" / "console.log").find("val_loss"), std::string::npos);
  const auto report = store_dir / "reports" / "nightly" / night.filename() / "report.md";
  EXPECT_TRUE(std::filesystem::exists(report)) << report;
  EXPECT_NE(r.output.find("report: " + report.string()), std::string::npos) << r.output;
  Store store = Store::open(store_dir / "night.db");
  EXPECT_EQ(store.benchmark_history("good_bench/BM_Gemm/512").size(), 5u);
  const auto sweeps = store.sweeps();
  ASSERT_EQ(sweeps.size(), 1u);
  const auto smoke = store.runs(sweeps[0].id);
  ASSERT_EQ(smoke.size(), 1u);
  EXPECT_EQ(smoke[0].status, RunStatus::ok) << smoke[0].reason;
  EXPECT_EQ(std::filesystem::path(smoke[0].log_path), night / "smoke" / "console.log");
}

TEST_F(RecordE2E, NightlyRefusesAnEmptyDbAndANonPositiveLimit) {
  Result r = harness_without_db({"nightly", "--db", "", "--ingest", (dir / "none.json").string()});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--db: the path is empty"), std::string::npos) << r.output;
  r = harness({"nightly", "--no-build", "--bench-timeout", "0"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--bench-timeout"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace gpt::harness
