// End-to-end tests of `harness nightly`: benchmark programs run in isolation (a failing or foreign program
// is noted and the night goes on), and `--ingest` of Google Benchmark JSON made elsewhere (one night per
// file, dated from its context, units normalised, one decision and a report).
#include <sys/stat.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

std::string gbench_json(const std::string& date, const std::string& unit, double value, const std::string& commit) {
  nlohmann::json benchmarks = nlohmann::json::array();
  for (int rep = 0; rep < 5; ++rep) {
    const double jitter = 1.0 + 0.002 * (rep - 2);
    benchmarks.push_back({{"name", "BM_Gemm/512/repeats:5"}, {"run_name", "BM_Gemm/512"}, {"run_type", "iteration"},
                          {"real_time", value * jitter}, {"cpu_time", value}, {"time_unit", unit}});
    benchmarks.push_back({{"name", "BM_Norm/64/repeats:5"}, {"run_name", "BM_Norm/64"}, {"run_type", "iteration"},
                          {"real_time", 2000.0 * jitter}, {"cpu_time", 2000.0}, {"time_unit", "ns"}});
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
    dir.write(file, gbench_json(day(d), in_us ? "us" : "ns", in_us ? 10.0 * (1 + 0.001 * (d % 3)) : 10000.0 * (1 + 0.001 * (d % 3)),
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
  const Result slow = harness({"nightly", "--ingest", (dir / "gb/night9.json").string(), "--ingest",
                               (dir / "gb/broken.json").string()});
  EXPECT_EQ(slow.code, 1) << slow.output;
  EXPECT_NE(slow.output.find("REGRESSION gemm_bench/BM_Gemm/512"), std::string::npos) << slow.output;
  EXPECT_NE(slow.output.find("broken.json"), std::string::npos) << slow.output;  // noted, not fatal
  const auto report = dir / "reports" / "nightly" / "ingest-2026-11-09T02:00:00Z";
  EXPECT_NE(read_file(report / "report.md").find("**REGRESSION**"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(report / "gemm_bench_BM_Gemm_512.svg"));
}

TEST_F(RecordE2E, NightlyRunsEachBenchmarkProgramInIsolation) {
  const std::string good =
      "#!/bin/sh\nfor a in \"$@\"; do case $a in --benchmark_out=*) out=${a#--benchmark_out=};; esac; done\n"
      "printf '%s' '" + gbench_json(day(1), "us", 12.0, "") + "' > \"$out\"\n";
  dir.write("bench/good_bench", good);
  dir.write("bench/foreign_bench", "#!/bin/sh\necho 'not a Google Benchmark program'\n");
  dir.write("bench/crashing_bench", "#!/bin/sh\nkill -SEGV $$\n");
  dir.write("bench/garbled_bench",
            "#!/bin/sh\nfor a in \"$@\"; do case $a in --benchmark_out=*) out=${a#--benchmark_out=};; esac; done\n"
            "echo '{\"benchmarks\": [' > \"$out\"\n");
  for (const char* p : {"bench/good_bench", "bench/foreign_bench", "bench/crashing_bench", "bench/garbled_bench"}) {
    ::chmod((dir / p).c_str(), 0755);
  }
  dir.write("bench/manifest.txt", "# programs of this test\ncrashing_bench\nforeign_bench\ngarbled_bench\ngood_bench\n");
  const Result r = harness({"nightly", "--no-build", "--no-smoke", "--manifest", (dir / "bench/manifest.txt").string()});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("failed or skipped: crashing_bench: signal 11"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("failed or skipped: foreign_bench: skipped: wrote no Google Benchmark JSON"), std::string::npos)
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

}  // namespace
}  // namespace gpt::harness
