// End-to-end tests of `harness nightly --ingest` over folders: every *.json of a folder in date order, one
// file merging several programs (one GPU run), a night already stored skipped, and the device history kept in
// results/benchmarks listed by `harness query`.
#include <nlohmann/json.hpp>

#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

// One GPU run: two programs in one file, each entry naming its own (the results/benchmarks layout).
std::string device_call_json(const std::string& date, const std::string& commit, double attention_ms, double step_ms) {
  nlohmann::json benchmarks = nlohmann::json::array();
  for (int rep = 0; rep < 3; ++rep) {
    benchmarks.push_back({{"name", "BM_AttentionForward/window:640/manual_time"},
                          {"run_type", "iteration"},
                          {"real_time", attention_ms},
                          {"time_unit", "ms"},
                          {"executable", "attention_bench"}});
    benchmarks.push_back({{"name", "BM_TrainStep/stage2/fp8:on/data:synthetic"},
                          {"run_type", "iteration"},
                          {"iterations", 6},
                          {"real_time", step_ms},
                          {"time_unit", "ms"},
                          {"executable", "train_step_bench"}});
  }
  nlohmann::json context = {{"date", date},         {"host_name", "vm"},    {"executable", "device-call"},
                            {"git_commit", commit}, {"gpu", "NVIDIA H200"}, {"driver", "580.159.04"}};
  return nlohmann::json{{"context", context}, {"benchmarks", benchmarks}}.dump();
}

TEST_F(RecordE2E, NightlyIngestsAFolderInDateOrderWithOneSuitePerProgram) {
  // File names sort against the dates: the store must follow the dates.
  dir.write("calls/a-late.json", device_call_json("2026-12-04T20:57:31+00:00", "bbbb", 0.205, 684.5));
  dir.write("calls/b-early.json", device_call_json("2026-12-03T19:50:00+00:00", "aaaa", 0.260, 828.3));
  dir.write("calls/notes.txt", "not a benchmark file");
  const Result r = harness({"nightly", "--ingest", (dir / "calls").string()});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.output;
  EXPECT_EQ(r.output.find("notes.txt"), std::string::npos) << r.output;  // only *.json

  Store store = Store::open(db());
  const auto step = store.benchmark_history("train_step_bench", "BM_TrainStep/stage2/fp8:on/data:synthetic");
  ASSERT_EQ(step.size(), 6u);
  EXPECT_EQ(step.front().recorded_at, "2026-12-03T19:50:00Z");
  EXPECT_EQ(step.front().revision, "aaaa");
  EXPECT_DOUBLE_EQ(step.back().value, 684.5e6);  // ms stored as ns
  EXPECT_EQ(step.back().revision, "bbbb");
  // The earlier night got the lower ids: stored in date order, not in name order.
  EXPECT_LT(step.front().id, step.back().id);
  EXPECT_EQ(store.benchmark_history("attention_bench", "BM_AttentionForward/window:640/manual_time").size(), 6u);
  EXPECT_TRUE(store.benchmark_history("device-call", "BM_TrainStep/stage2/fp8:on/data:synthetic").empty());
  const auto env = store.environment(*step.back().environment_id);
  EXPECT_EQ(env->gpu, "NVIDIA H200");
  EXPECT_EQ(env->driver, "580.159.04");

  // An empty folder is an error naming it.
  std::filesystem::create_directories(dir / "empty");
  const Result empty = harness({"nightly", "--ingest", (dir / "empty").string()});
  EXPECT_NE(empty.code, 0);
  EXPECT_NE(empty.output.find("holds no *.json file"), std::string::npos) << empty.output;
}

TEST_F(RecordE2E, NightlyIngestSkipsANightAlreadyStored) {
  dir.write("calls/one.json", device_call_json("2026-12-03T19:50:00+00:00", "aaaa", 0.260, 828.3));
  const Result first = harness({"nightly", "--ingest", (dir / "calls").string()});
  ASSERT_TRUE(first.code == 0 || first.code == 1) << first.output;

  // The same night again, as the same file and as a reformatted copy under another name: nothing is added.
  const std::string copy = nlohmann::json::parse(read_file(dir / "calls/one.json")).dump(2);
  dir.write("again/renamed-copy.json", copy);
  const Result again =
      harness({"nightly", "--ingest", (dir / "calls/one.json").string(), "--ingest", (dir / "again").string()});
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_NE(again.output.find("one.json: already stored (night 2026-12-03T19:50:00Z), skipped"), std::string::npos)
      << again.output;
  EXPECT_NE(again.output.find("renamed-copy.json: already stored"), std::string::npos) << again.output;
  EXPECT_NE(again.output.find("nothing new (2 file(s) already stored)"), std::string::npos) << again.output;
  Store store = Store::open(db());
  EXPECT_EQ(store.benchmark_history("train_step_bench", "BM_TrainStep/stage2/fp8:on/data:synthetic").size(), 3u);

  // A later night is stored beside it.
  dir.write("calls/two.json", device_call_json("2026-12-04T20:57:31+00:00", "bbbb", 0.205, 684.5));
  const Result later = harness({"nightly", "--ingest", (dir / "calls").string()});
  ASSERT_TRUE(later.code == 0 || later.code == 1) << later.output;
  EXPECT_NE(later.output.find("one.json: already stored"), std::string::npos) << later.output;
  EXPECT_EQ(store.benchmark_history("train_step_bench", "BM_TrainStep/stage2/fp8:on/data:synthetic").size(), 6u);
}

// One night of one training-step row on a named GPU, five repetitions with a small spread.
std::string step_night_json(const std::string& date, const std::string& gpu, double step_ms,
                            const std::string& commit = "c0ffee") {
  nlohmann::json benchmarks = nlohmann::json::array();
  for (int rep = 0; rep < 5; ++rep) {
    benchmarks.push_back({{"name", "BM_TrainStep/stage2/fp8:on/data:synthetic"},
                          {"run_type", "iteration"},
                          {"real_time", step_ms * (1.0 + 0.002 * (rep - 2))},
                          {"time_unit", "ms"},
                          {"executable", "train_step_bench"}});
  }
  nlohmann::json context = {
      {"date", date}, {"host_name", "vm"}, {"executable", "device-call"}, {"git_commit", commit}, {"gpu", gpu}};
  return nlohmann::json{{"context", context}, {"benchmarks", benchmarks}}.dump();
}

// A GPU run on another kind of GPU is not a change of the code: a slower H100 night after H200 nights is no
// regression, while the same slowdown on the H200 is one. Each GPU model is its own history.
TEST_F(RecordE2E, NightlyKeepsEachGpuModelsHistoryApart) {
  for (int d = 1; d <= 6; ++d) {
    const std::string date = "2026-12-0" + std::to_string(d) + "T12:00:00+00:00";
    dir.write("h200/night" + std::to_string(d) + ".json", step_night_json(date, "NVIDIA H200", 656.0 + 0.5 * (d % 2)));
  }
  const Result base = harness({"nightly", "--ingest", (dir / "h200").string()});
  ASSERT_EQ(base.code, 0) << base.output;

  dir.write("h100.json", step_night_json("2026-12-07T12:00:00+00:00", "NVIDIA H100 80GB HBM3", 760.0));
  const Result other_gpu = harness({"nightly", "--ingest", (dir / "h100.json").string()});
  EXPECT_EQ(other_gpu.code, 0) << other_gpu.output;
  EXPECT_NE(other_gpu.output.find("0 confirmed regression(s)"), std::string::npos) << other_gpu.output;
  EXPECT_NE(other_gpu.output.find("on NVIDIA H100 80GB HBM3"), std::string::npos) << other_gpu.output;

  dir.write("h200-slow.json", step_night_json("2026-12-08T12:00:00+00:00", "NVIDIA H200", 760.0));
  const Result slower = harness({"nightly", "--ingest", (dir / "h200-slow.json").string()});
  EXPECT_EQ(slower.code, 1) << slower.output;
  EXPECT_NE(slower.output.find("REGRESSION train_step_bench/BM_TrainStep/stage2/fp8:on/data:synthetic on NVIDIA H200"),
            std::string::npos)
      << slower.output;

  // `query history` names each row's GPU and can keep one.
  const Result h100_rows = harness({"query", "history", "--format", "csv", "--suite", "train_step_bench", "--name",
                                    "BM_TrainStep/stage2/fp8:on/data:synthetic", "--gpu", "NVIDIA H100 80GB HBM3"});
  ASSERT_EQ(h100_rows.code, 0) << h100_rows.output;
  EXPECT_NE(h100_rows.output.find(",NVIDIA H100 80GB HBM3"), std::string::npos) << h100_rows.output;
  EXPECT_EQ(h100_rows.output.find(",NVIDIA H200\n"), std::string::npos) << h100_rows.output;
  size_t rows = 0;
  for (char c : h100_rows.output) rows += c == '\n';
  EXPECT_EQ(rows, 1u + 5u) << h100_rows.output;  // header + the H100 night's five repetitions
}

// A slowdown is reported once, on the night it is found (with that night's date and commit), then tracked; a later
// night at the same level (a copy of the slow night under a new date and commit) flags nothing.
TEST_F(RecordE2E, NightlyReportsAChangePointOnceThenTracksIt) {
  for (int d = 1; d <= 8; ++d) {
    const std::string date = "2026-12-0" + std::to_string(d) + "T12:00:00+00:00";
    dir.write("calls/night" + std::to_string(d) + ".json", step_night_json(date, "NVIDIA H200", 656.0 + 0.5 * (d % 2)));
  }
  ASSERT_EQ(harness({"nightly", "--ingest", (dir / "calls").string()}).code, 0);

  dir.write("slow.json", step_night_json("2026-12-09T12:00:00+00:00", "NVIDIA H200", 700.0, "bad1dea5"));
  const Result found = harness({"nightly", "--ingest", (dir / "slow.json").string()});
  EXPECT_EQ(found.code, 1) << found.output;
  EXPECT_NE(found.output.find("NEW CHANGE POINT train_step_bench/BM_TrainStep/stage2/fp8:on/data:synthetic on NVIDIA "
                              "H200: +6."),
            std::string::npos)
      << found.output;
  EXPECT_NE(found.output.find("since 2026-12-09 12:00 UTC (bad1dea)"), std::string::npos) << found.output;

  dir.write("same.json", step_night_json("2026-12-10T12:00:00+00:00", "NVIDIA H200", 700.0, "feed1234"));
  const Result unchanged = harness({"nightly", "--ingest", (dir / "same.json").string()});
  EXPECT_EQ(unchanged.code, 0) << unchanged.output;
  EXPECT_EQ(unchanged.output.find("REGRESSION"), std::string::npos) << unchanged.output;
  EXPECT_EQ(unchanged.output.find("change point at night"), std::string::npos) << unchanged.output;
  EXPECT_NE(unchanged.output.find("nightly 2026-12-10 12:00 UTC (feed123)"), std::string::npos) << unchanged.output;
  EXPECT_NE(unchanged.output.find("tracked change point train_step_bench/"), std::string::npos) << unchanged.output;
  const std::string md = read_file(dir / "reports" / "nightly" / "ingest-2026-12-10T12:00:00Z" / "report.md");
  EXPECT_NE(md.find("- commit: feed1234"), std::string::npos) << md;
  EXPECT_NE(md.find("## Change points"), std::string::npos) << md;
  EXPECT_NE(md.find("2026-12-09 12:00 UTC (bad1dea)"), std::string::npos) << md;

  const Result stored = harness(
      {"query", "sql", "--format", "csv", "SELECT start_night, start_commit, found_night, status FROM change_points"});
  ASSERT_EQ(stored.code, 0) << stored.output;
  EXPECT_NE(stored.output.find("2026-12-09T12:00:00Z,bad1dea5,2026-12-09T12:00:00Z,open"), std::string::npos)
      << stored.output;
}

// Several nights ingested at once are decided one by one: the change point is found on its own night.
TEST_F(RecordE2E, NightlyIngestOfManyNightsFindsEachChangePointOnItsNight) {
  for (int d = 1; d <= 9; ++d) {
    const std::string date = "2026-12-0" + std::to_string(d) + "T12:00:00+00:00";
    const bool slow = d >= 8;
    dir.write("calls/night" + std::to_string(d) + ".json",
              step_night_json(date, "NVIDIA H200", slow ? 700.0 : 656.0 + 0.5 * (d % 2), slow ? "bad1dea5" : "c0ffee"));
  }
  const Result r = harness({"nightly", "--ingest", (dir / "calls").string()});
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("since 2026-12-08 12:00 UTC (bad1dea)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("found 2026-12-08 12:00 UTC (bad1dea)"), std::string::npos) << r.output;
}

// The device history kept in the tree: every call of results/benchmarks stored, and a figure of the record
// (bef7594's final call: stage 2, FP8 on, 684.5 ms/step) listed by `harness query history`.
TEST_F(RecordE2E, CommittedDeviceHistoryIsListedByQuery) {
  const auto folder = std::filesystem::path(SPEEDRUN_FIXTURES_DIR) / ".." / ".." / "results" / "benchmarks";
  ASSERT_TRUE(std::filesystem::is_directory(folder)) << folder;
  const Result r = harness({"nightly", "--ingest", folder.string()});
  ASSERT_TRUE(r.code == 0 || r.code == 1) << r.output;  // 1: the detection flagged a slower newest call
  EXPECT_EQ(r.output.find("failed or skipped"), std::string::npos) << r.output;

  const Result nights = harness(
      {"query", "sql", "--format", "csv", "SELECT COUNT(DISTINCT recorded_at) AS nights FROM benchmark_results"});
  ASSERT_EQ(nights.code, 0) << nights.output;
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(folder)) files += e.path().extension() == ".json" ? 1 : 0;
  EXPECT_NE(nights.output.find("nights\n" + std::to_string(files) + "\n"), std::string::npos) << nights.output;

  const Result step = harness({"query", "history", "--format", "csv", "--suite", "train_step_bench", "--name",
                               "BM_TrainStep/stage2/fp8:on/data:synthetic"});
  ASSERT_EQ(step.code, 0) << step.output;
  EXPECT_NE(step.output.find("bef7594e51ea34876360e419bca0be8df5eb201c,684461486.8"), std::string::npos) << step.output;
  const Result attention = harness(
      {"query", "history", "--format", "csv", "--name", "BM_AttentionForward/variant:11/window:640/manual_time"});
  ASSERT_EQ(attention.code, 0) << attention.output;
  EXPECT_NE(attention.output.find("attention_bench"), std::string::npos) << attention.output;
  EXPECT_NE(attention.output.find("2026-12-04T20:57:31Z"), std::string::npos) << attention.output;
}

}  // namespace
}  // namespace gpt::harness
