// End-to-end tests of the values `harness nightly --ingest` stores: a time that is no measurement (infinite once in
// nanoseconds, or absurdly long) is refused naming the file and the benchmark, a database that already holds one
// still decides its nights, and a command whose every file is refused says why for each.
#include <nlohmann/json.hpp>

#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

std::string one_benchmark_json(const std::string& date, const std::string& name, double real_time,
                               const std::string& unit) {
  nlohmann::json benchmarks = nlohmann::json::array();
  for (int rep = 0; rep < 3; ++rep) {
    benchmarks.push_back({{"name", name}, {"run_type", "iteration"}, {"real_time", real_time}, {"time_unit", unit}});
  }
  return nlohmann::json{{"context", {{"date", date}, {"executable", "gemm_bench"}}}, {"benchmarks", benchmarks}}.dump();
}

size_t stored_values(const std::filesystem::path& db) {
  Store store = Store::open(db);
  auto count = store.db().prepare("SELECT COUNT(*) FROM benchmark_results");
  count.step();
  return static_cast<size_t>(count.column_int(0));
}

// 1e308 ms is a finite double as written, +inf in nanoseconds: it was stored, and every later ingest failed in
// E-divisive ("series must be finite").
TEST_F(RecordE2E, NightlyIngestRefusesATimeThatIsInfiniteInNanoseconds) {
  dir.write("bad.json", one_benchmark_json("2026-12-01T02:00:00+00:00", "BM_Gemm/512", 1e308, "ms"));
  const Result r = harness({"nightly", "--ingest", (dir / "bad.json").string()});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("bad.json: benchmark 'BM_Gemm/512': real_time 1e+308 ms"), std::string::npos) << r.output;
  EXPECT_EQ(stored_values(db()), 0u);

  dir.write("good.json", one_benchmark_json("2026-12-02T02:00:00+00:00", "BM_Gemm/512", 1.5, "ms"));
  const Result good = harness({"nightly", "--ingest", (dir / "good.json").string()});
  EXPECT_EQ(good.code, 0) << good.output;
  EXPECT_EQ(stored_values(db()), 3u);
}

TEST_F(RecordE2E, NightlyIngestRefusesAnAbsurdlyLongTime) {
  dir.write("week.json", one_benchmark_json("2026-12-01T02:00:00+00:00", "BM_Slow", 2e6, "s"));
  const Result r = harness({"nightly", "--ingest", (dir / "week.json").string()});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("week.json: benchmark 'BM_Slow'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("at most 1e+06 s per iteration"), std::string::npos) << r.output;
}

// Every file refused: the message named no file, field or reason ("nothing stored (2 file(s) unreadable)").
TEST_F(RecordE2E, NightlyIngestOfOnlyBadFilesNamesEachFileAndItsReason) {
  dir.write("in/inf.json", one_benchmark_json("2026-12-01T02:00:00+00:00", "BM_Gemm/512", 1e308, "ms"));
  dir.write("in/undated.json", R"({"context": {}, "benchmarks": []})");
  const Result r = harness({"nightly", "--ingest", (dir / "in").string()});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("nothing stored: 2 file(s) refused"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("inf.json: benchmark 'BM_Gemm/512': real_time 1e+308 ms"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("undated.json: no context.date"), std::string::npos) << r.output;
}

// A database an older harness wrote +inf into: the value is left out of the history (with a warning) and the
// nights around it are decided, where every ingest used to exit 2.
TEST_F(RecordE2E, NightlyIngestDecidesAroundAnInfiniteValueStoredEarlier) {
  dir.write("n1.json", one_benchmark_json("2026-12-01T02:00:00+00:00", "BM_Gemm/512", 1.5, "ms"));
  ASSERT_EQ(harness({"nightly", "--ingest", (dir / "n1.json").string()}).code, 0);
  {
    Store store = Store::open(db());
    store.db().exec(
        "INSERT INTO benchmark_results (suite, name, value, unit, recorded_at) "
        "SELECT suite, name, 9e999, unit, '2026-12-02T02:00:00Z' FROM benchmark_results LIMIT 1");
  }
  dir.write("n3.json", one_benchmark_json("2026-12-03T02:00:00+00:00", "BM_Gemm/512", 1.5, "ms"));
  const Result r = harness({"nightly", "--ingest", (dir / "n3.json").string()});
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("is inf, not a time; left out of the history"), std::string::npos) << r.output;
  EXPECT_EQ(harness({"site", "--out", (dir / "site").string()}).code, 0);
}

}  // namespace
}  // namespace gpt::harness
