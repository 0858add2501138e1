#include <gtest/gtest.h>

#include <cmath>

#include "harness/record/harvest.h"
#include "harness/record/sweep_runner.h"
#include "harness/render/svg.h"
#include "harness/report/sweep_report.h"
#include "harness/report/table_format.h"
#include "base/check.h"
#include "tests/harness/temp_dir.h"

namespace gpt::harness {
namespace {

using testing::TempDir;

TEST(Svg, EscapesMarkupAndControlCharacters) {
  EXPECT_EQ(svg::escape("a<b & \"c\" 'd'>\x01"), "a&lt;b &amp; &quot;c&quot; &apos;d&apos;&gt;");
}

TEST(Svg, NiceTicksUseOneTwoFiveSteps) {
  EXPECT_EQ(svg::nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(svg::nice_ticks(0, 1, 4), (std::vector<double>{0, 0.5, 1}));  // 0.25 rounds up to 0.5
  const auto t = svg::nice_ticks(3.261, 3.299, 4);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_NEAR(t[0], 3.27, 1e-12);
  EXPECT_NEAR(t[1] - t[0], 0.01, 1e-12);
  EXPECT_EQ(svg::nice_ticks(5, 5), std::vector<double>{5});
  EXPECT_TRUE(svg::nice_ticks(0, NAN).empty());
}

TEST(Svg, LineChartDrawsOnePolylinePerSeriesAndTheTarget) {
  svg::LineChart chart{"t<1>", "step", "loss", {{"a", {{0, 10}, {10, 3.3}}}, {"b", {{0, 11}, {10, NAN}}}}, 3.28};
  const std::string out = chart.render();
  EXPECT_EQ(out.rfind("<svg", 0), 0u);
  EXPECT_NE(out.find("t&lt;1&gt;"), std::string::npos);
  size_t lines = 0;
  for (size_t p = out.find("<polyline"); p != std::string::npos; p = out.find("<polyline", p + 1)) ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_NE(out.find("stroke-dasharray"), std::string::npos);
  EXPECT_EQ(out.find("nan"), std::string::npos);
}

TEST(Svg, StripChartDrawsADotPerValueAndAMeanPerGroup) {
  svg::StripChart chart{"times", "ms", {{"base", {1000, 1010, 990}}, {"new", {950}}}};
  const std::string out = chart.render();
  size_t dots = 0;
  for (size_t p = out.find("<circle"); p != std::string::npos; p = out.find("<circle", p + 1)) ++dots;
  EXPECT_EQ(dots, 4u);
  EXPECT_NE(out.find("mean 1000"), std::string::npos);
}

sql::Table sample_table() {
  sql::Table t;
  t.columns = {"id", "name", "loss"};
  t.rows = {{std::int64_t{1}, std::string("a,b"), 3.25},
            {std::int64_t{2}, std::string("say \"hi\""), std::monostate{}}};
  return t;
}

TEST(TableFormat, CsvQuotesFieldsThatNeedIt) {
  EXPECT_EQ(format_table(sample_table(), "csv"), "id,name,loss\n1,\"a,b\",3.25\n2,\"say \"\"hi\"\"\",\n");
}

TEST(TableFormat, JsonIsAnArrayOfObjectsWithNulls) {
  EXPECT_EQ(format_table(sample_table(), "json"),
            "[\n  {\n    \"id\": 1,\n    \"loss\": 3.25,\n    \"name\": \"a,b\"\n  },\n  {\n    \"id\": 2,\n"
            "    \"loss\": null,\n    \"name\": \"say \\\"hi\\\"\"\n  }\n]\n");
}

TEST(TableFormat, TableAlignsColumnsAndCountsRows) {
  const std::string out = format_table(sample_table(), "table");
  EXPECT_EQ(out.substr(0, out.find('\n')), "id  name      loss");
  EXPECT_NE(out.find("(2 rows)"), std::string::npos);
  EXPECT_THROW(format_table(sample_table(), "xml"), gpt::Error);
}

TEST(DevicePartitions, SplitsVisibleDevices) {
  EXPECT_EQ(device_partitions(2, 2, "4,5,6,7"), (std::vector<std::string>{"4,5", "6,7"}));
  EXPECT_EQ(device_partitions(3, 1, nullptr), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(device_partitions(1, 2, "3,1,2"), (std::vector<std::string>{"3,1"}));
  EXPECT_THROW(device_partitions(4, 2, "0,1"), gpt::Error);
  EXPECT_THROW(device_partitions(0, 1, nullptr), gpt::Error);
  // CUDA_VISIBLE_DEVICES= (set, empty: no GPUs) handed out devices 0,1 and 2,3.
  EXPECT_EQ(device_partitions(2, 2, ""), (std::vector<std::string>{"", ""}));
  EXPECT_EQ(device_partitions(3, 1, ""), (std::vector<std::string>{"", "", ""}));
}

RunPlan plan_in(const TempDir& dir, const std::string& log) {
  RunPlan plan;
  plan.seed = 4;
  plan.run_id = "r4";
  plan.out_dir = dir.path();
  plan.log_path = dir.write("console.log", log);
  return plan;
}

ExitInfo exited(int code) {
  ExitInfo e;
  e.exited = true;
  e.exit_code = code;
  return e;
}

constexpr const char* kGoodLog =
    "step:0/10 val_loss:10.8 train_time:0ms step_avg:0ms\n"
    "step:10/10 val_loss:3.2500 train_time:900ms step_avg:90ms\n";

TEST(Harvest, CleanExitWithFinalValidationIsOk) {
  TempDir dir;
  const RunRecord r = harvest_run(plan_in(dir, kGoodLog), exited(0), RunEnd::exited);
  EXPECT_EQ(r.status, RunStatus::ok);
  EXPECT_DOUBLE_EQ(*r.final_val_loss, 3.25);
  EXPECT_DOUBLE_EQ(*r.train_time_ms, 900);
  EXPECT_EQ(r.seed, 4);
  EXPECT_TRUE(r.reason.empty());
}

TEST(Harvest, SummaryJsonOverridesTheLogAndBadJsonIsNoted) {
  TempDir dir;
  dir.write("r4.json", R"({"final_val_loss":3.24996,"tokens":777,"steps":10,"total_steps":10})");
  RunRecord r = harvest_run(plan_in(dir, kGoodLog), exited(0), RunEnd::exited);
  EXPECT_DOUBLE_EQ(*r.final_val_loss, 3.24996);  // the exact value behind the log's 3.2500
  EXPECT_EQ(r.tokens, 777);
  dir.write("r4.json", "{broken");
  r = harvest_run(plan_in(dir, kGoodLog), exited(0), RunEnd::exited);
  EXPECT_EQ(r.status, RunStatus::ok);
  EXPECT_NE(r.reason.find("ignored the run summary"), std::string::npos) << r.reason;
}

TEST(Harvest, ExitCodesMapToStatuses) {
  TempDir dir;
  EXPECT_EQ(harvest_run(plan_in(dir, kGoodLog), exited(3), RunEnd::exited).status, RunStatus::diverged);
  const RunRecord bad_input = harvest_run(plan_in(dir, "error: --recipe: no recipe 'x'\n"), exited(2), RunEnd::exited);
  EXPECT_EQ(bad_input.status, RunStatus::failed);
  EXPECT_NE(bad_input.reason.find("rejected its input (exit code 2); last output: \"error: --recipe: no recipe 'x'\""),
            std::string::npos)
      << bad_input.reason;
  EXPECT_EQ(harvest_run(plan_in(dir, kGoodLog), exited(1), RunEnd::exited).status, RunStatus::failed);
  ExitInfo segv;
  segv.signal = 11;
  EXPECT_NE(harvest_run(plan_in(dir, kGoodLog), segv, RunEnd::exited).reason.find("crashed: signal 11"),
            std::string::npos);
  EXPECT_EQ(harvest_run(plan_in(dir, kGoodLog), segv, RunEnd::timed_out, 5.0).status, RunStatus::timeout);
  EXPECT_EQ(harvest_run(plan_in(dir, kGoodLog), segv, RunEnd::interrupted).status, RunStatus::killed);
  const RunRecord early =
      harvest_run(plan_in(dir, "step:5/10 train_time:1ms step_avg:0.2ms\n"), exited(0), RunEnd::exited);
  EXPECT_EQ(early.status, RunStatus::incomplete);
  EXPECT_NE(early.reason.find("exited 0 but stopped at step 5/10"), std::string::npos) << early.reason;
}

// A summary written by a run cut short (steps below total_steps) carries no final result.
TEST(Harvest, RunCutShortAtAValidationIsIncompleteEvenWithASummaryLoss) {
  TempDir dir;
  dir.write("r4.json", R"({"final_val_loss":3.2905,"steps":2250,"total_steps":2315})");
  const RunRecord r = harvest_run(
      plan_in(
          dir,
          "step:2249/2315 train_time:1ms step_avg:1ms\nstep:2250/2315 val_loss:3.2905 train_time:2ms step_avg:1ms\n"),
      exited(0), RunEnd::exited);
  EXPECT_EQ(r.status, RunStatus::incomplete) << r.reason;
  EXPECT_FALSE(r.final_val_loss);
  EXPECT_EQ(r.steps, 2250);
}

TEST(Harvest, SummaryProvenanceIsKept) {
  TempDir dir;
  dir.write("r4.json", R"({"recipe":{"name":"tiny","hash":"0123abcd"},"world_size":2,"steps":10,"total_steps":10,
                          "final_val_loss":3.25,"environment":{"gpu":"cpu","git_commit":"feedbee"}})");
  const RunRecord r = harvest_run(plan_in(dir, kGoodLog), exited(0), RunEnd::exited);
  EXPECT_EQ(r.status, RunStatus::ok);
  ASSERT_TRUE(r.environment);
  EXPECT_EQ(r.environment->git_commit, "feedbee");
  EXPECT_EQ(r.params.at("recipe_hash"), "0123abcd");
  EXPECT_EQ(r.params.at("world_size"), "2");
}

TEST(Harvest, CycledTrainDataIsKeptAsRunParams) {
  TempDir dir;
  dir.write("r4.json",
            R"({"steps":10,"total_steps":10,"final_val_loss":3.25,"train_data":{"cycled":true,"passes":6}})");
  const RunRecord r = harvest_run(plan_in(dir, kGoodLog), exited(0), RunEnd::exited);
  EXPECT_EQ(r.params.at("train_data_cycled"), "1");
  EXPECT_EQ(r.params.at("train_data_passes"), "6");
  dir.write("r4.json", R"({"steps":10,"total_steps":10,"train_data":{"cycled":false,"passes":1}})");
  EXPECT_EQ(harvest_run(plan_in(dir, kGoodLog), exited(0), RunEnd::exited).params.count("train_data_cycled"), 0u);
}

// A record sweep named "s" with `runs_planned` planned runs.
SweepInfo add_record_sweep(Store& store, int runs_planned) {
  SweepInfo s;
  s.name = "s";
  s.kind = "record";
  s.runs_planned = runs_planned;
  s.id = store.create_sweep(s);
  return s;
}

RunRecord ok_run(const SweepInfo& sweep, int seed, double final_val_loss) {
  RunRecord r;
  r.sweep_id = sweep.id;
  r.seed = seed;
  r.run_id = "r" + std::to_string(seed);
  r.status = RunStatus::ok;
  r.final_val_loss = final_val_loss;
  return r;
}

TEST(SweepReportTest, RunsOnCycledTrainDataAreNeverARecord) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  const SweepInfo s = add_record_sweep(store, 3);
  for (int i = 0; i < 3; ++i) {
    RunRecord r = ok_run(s, i, 3.0 + 0.001 * i);  // far below the target: the t-test alone would pass
    if (i == 1) r.params = {{"train_data_cycled", "1"}, {"train_data_passes", "5"}};
    store.add_run(r);
  }
  const SweepReport rep = build_sweep_report(store, *store.find_sweep("s"), ReportOptions{3.28, 0.01, false});
  ASSERT_EQ(rep.arms.size(), 1u);
  EXPECT_EQ(rep.arms[0].cycled_runs, 1u);
  EXPECT_LT(rep.arms[0].ttest->p_value, 0.01);
  EXPECT_FALSE(rep.arms[0].pass);
  EXPECT_FALSE(rep.pass);
  EXPECT_EQ(rep.arms[0].verdict.rfind("NOT A RECORD: 1 run(s) restarted their train shards", 0), 0u)
      << rep.arms[0].verdict;
}

TEST(SweepReportTest, StatisticsCoverOnlyOkRunsAndListTheOthers) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  const SweepInfo s = add_record_sweep(store, 4);
  const double losses[] = {3.270, 3.272, 3.268};
  for (int i = 0; i < 3; ++i) {
    RunRecord r = ok_run(s, i, losses[i]);
    r.train_time_ms = 1000 + 10 * i;
    store.add_run(r);
  }
  RunRecord bad;
  bad.sweep_id = s.id;
  bad.seed = 3;
  bad.run_id = "r3";
  bad.status = RunStatus::diverged;
  bad.reason = "final val loss is nan";
  store.add_run(bad);
  const SweepReport rep = build_sweep_report(store, *store.find_sweep("s"), ReportOptions{3.28, 0.01, false});
  ASSERT_EQ(rep.arms.size(), 1u);
  const ArmReport& arm = rep.arms[0];
  EXPECT_EQ(arm.ok.size(), 3u);
  EXPECT_EQ(arm.not_ok.size(), 1u);
  EXPECT_NEAR(arm.loss->mean, 3.270, 1e-12);
  EXPECT_NEAR(arm.loss->std, 0.002, 1e-12);
  // t = (3.270 - 3.28) / (0.002 / sqrt(3)) = -8.660254; with df = 2 the t CDF has the closed form
  // 1/2 + t / (2 sqrt(2 + t^2)) = 0.006537.
  EXPECT_NEAR(arm.ttest->t, -8.660254, 1e-5);
  EXPECT_NEAR(arm.ttest->p_value, 0.5 - 8.660254 / (2 * std::sqrt(77.0)), 1e-6);
  EXPECT_TRUE(arm.pass);
  EXPECT_NEAR(arm.time_ms->median, 1010, 1e-12);
  const std::string text = render_text(rep);
  EXPECT_NE(text.find("seed 3  diverged  step -  r3: final val loss is nan"), std::string::npos) << text;
  const auto md = write_report_files(rep, dir / "reports");
  EXPECT_TRUE(std::filesystem::exists(md));
  EXPECT_TRUE(std::filesystem::exists(dir / "reports" / "train_time.svg"));
  EXPECT_EQ(to_json(rep)["arms"][0]["n_not_ok"], 1);
}

}  // namespace
}  // namespace gpt::harness
