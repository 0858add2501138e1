#include "harness/store/store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <sstream>

#include "harness/record/spool.h"
#include "harness/store/change_points.h"
#include "harness/store/schema.h"
#include "base/check.h"
#include "tests/harness/temp_dir.h"

namespace gpt::harness {
namespace {

using testing::TempDir;

std::string error_of(const auto& fn) {
  try {
    fn();
  } catch (const gpt::Error& e) {
    return e.what();
  }
  return "";
}

SweepInfo sweep_named(std::string name, std::string kind = "record") {
  SweepInfo s;
  s.name = std::move(name);
  s.kind = std::move(kind);
  return s;
}

BenchmarkResult bench(std::string suite, std::string name, double value, std::string recorded_at,
                      std::string revision = "") {
  BenchmarkResult b;
  b.suite = std::move(suite);
  b.name = std::move(name);
  b.value = value;
  b.unit = "us";
  b.recorded_at = std::move(recorded_at);
  b.revision = std::move(revision);
  return b;
}

RunRecord sample_run(std::int64_t sweep, std::int64_t seed, RunStatus status = RunStatus::ok) {
  RunRecord r;
  r.sweep_id = sweep;
  r.seed = seed;
  r.run_id = "run-" + std::to_string(seed);
  r.status = status;
  r.exit_code = 0;
  r.final_val_loss = 3.27 + 0.001 * static_cast<double>(seed);
  r.train_time_ms = 1000.0 + static_cast<double>(seed);
  r.steps = 1390;
  r.total_steps = 1390;
  r.val_points = {{0, 10.8, 0.0}, {1390, *r.final_val_loss, *r.train_time_ms}};
  return r;
}

TEST(Store, CreatesSchemaAtLatestVersionInWalMode) {
  TempDir dir;
  Store store = Store::open(dir / "sub/results.db");
  EXPECT_EQ(store.schema_version(), latest_schema_version());
  EXPECT_GE(latest_schema_version(), 1);
  auto mode = store.db().query("PRAGMA journal_mode");
  ASSERT_EQ(mode.rows.size(), 1u);
  EXPECT_EQ(sql::to_string(mode.rows[0][0]), "wal");
}

TEST(Store, ReopeningKeepsDataAndVersion) {
  TempDir dir;
  std::int64_t id = 0;
  {
    Store store = Store::open(dir / "r.db");
    SweepInfo info = sweep_named("s1");
    info.recipe = "tiny";
    info.target = 3.28;
    info.runs_planned = 3;
    id = store.create_sweep(info);
  }
  Store again = Store::open(dir / "r.db");
  auto sweep = again.find_sweep("s1");
  ASSERT_TRUE(sweep);
  EXPECT_EQ(sweep->id, id);
  EXPECT_EQ(sweep->recipe, "tiny");
  ASSERT_TRUE(sweep->target);
  EXPECT_DOUBLE_EQ(*sweep->target, 3.28);
  EXPECT_FALSE(sweep->alpha);
  EXPECT_EQ(sweep->runs_planned, 3);
  EXPECT_FALSE(sweep->created_at.empty());
}

TEST(Store, FindsSweepByIdOrName) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  const auto id = store.create_sweep(sweep_named("alpha", "import"));
  EXPECT_EQ(store.find_sweep(std::to_string(id))->name, "alpha");
  EXPECT_EQ(store.find_sweep("alpha")->id, id);
  EXPECT_FALSE(store.find_sweep("beta"));
  EXPECT_FALSE(store.find_sweep("99"));
  EXPECT_FALSE(store.find_sweep("1x"));
}

TEST(Store, DuplicateSweepNameIsAClearError) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  store.create_sweep(sweep_named("same", "record"));
  EXPECT_NE(error_of([&] { store.create_sweep(sweep_named("same", "record")); }).find("already exists"),
            std::string::npos);
}

TEST(Store, RunsRoundTripWithValPoints) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  const auto sweep = store.create_sweep(sweep_named("s", "record"));
  RunRecord r = sample_run(sweep, 7);
  r.peak_memory_mib = 30220;
  r.reason = "";
  const auto id = store.add_run(r);
  auto back = store.run(id);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->seed, 7);
  EXPECT_EQ(back->run_id, "run-7");
  EXPECT_EQ(back->status, RunStatus::ok);
  EXPECT_DOUBLE_EQ(*back->final_val_loss, 3.277);
  EXPECT_DOUBLE_EQ(*back->peak_memory_mib, 30220);
  EXPECT_FALSE(back->tokens);
  ASSERT_EQ(back->val_points.size(), 2u);
  EXPECT_EQ(back->val_points[1].step, 1390);
  EXPECT_DOUBLE_EQ(*back->val_points[1].train_time_ms, 1007.0);
}

TEST(Store, RunsAreListedPerSweepInSeedOrder) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  const auto a = store.create_sweep(sweep_named("a", "record"));
  const auto b = store.create_sweep(sweep_named("b", "record"));
  store.add_run(sample_run(a, 2));
  store.add_run(sample_run(b, 1));
  store.add_run(sample_run(a, 0, RunStatus::diverged));
  auto runs = store.runs(a);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].seed, 0);
  EXPECT_EQ(runs[0].status, RunStatus::diverged);
  EXPECT_EQ(runs[1].seed, 2);
  EXPECT_TRUE(runs[0].val_points.empty());
  EXPECT_EQ(store.runs(std::nullopt).size(), 3u);
}

TEST(Store, DuplicateSeedIsRejectedUnlessReplacing) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  const auto s = store.create_sweep(sweep_named("s", "record"));
  store.add_run(sample_run(s, 1, RunStatus::killed));
  EXPECT_THROW(store.add_run(sample_run(s, 1)), gpt::Error);
  EXPECT_EQ(store.runs(s).size(), 1u);  // the failed insert left nothing behind
  store.add_run(sample_run(s, 1), /*replace=*/true);
  auto runs = store.runs(s, true);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, RunStatus::ok);
  EXPECT_EQ(runs[0].val_points.size(), 2u);
}

TEST(Store, RunStatusNamesRoundTrip) {
  for (auto s : {RunStatus::ok, RunStatus::failed, RunStatus::diverged, RunStatus::timeout, RunStatus::killed,
                 RunStatus::incomplete}) {
    EXPECT_EQ(parse_run_status(to_string(s)), s);
  }
  EXPECT_NE(error_of([] { parse_run_status("crashed"); }).find("unknown run status 'crashed'"), std::string::npos);
}

TEST(Store, EnvironmentsAreDeduplicatedByFingerprint) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  Environment e;
  e.gpu = "NVIDIA H100";
  e.driver = "550";
  e.cuda = "13.0";
  e.git_commit = "abc";
  const auto id1 = store.upsert_environment(e);
  const auto id2 = store.upsert_environment(e);
  EXPECT_EQ(id1, id2);
  e.git_dirty = true;
  const auto id3 = store.upsert_environment(e);
  EXPECT_NE(id1, id3);
  auto back = store.environment(id3);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->gpu, "NVIDIA H100");
  EXPECT_TRUE(back->git_dirty);
  EXPECT_FALSE(store.environment(12345));
}

// The environment fingerprint keys stored environment rows: its FNV-1a 64 value (fields each followed by 0x1f, from
// kFnv1a64StoredHashBasis) must stay what databases already hold. Expected value computed independently.
TEST(Store, EnvironmentFingerprintKeepsItsStoredValue) {
  Environment e;
  e.gpu = "NVIDIA H100";
  e.driver = "550.54";
  e.cuda = "12.4";
  e.nccl = "2.21";
  e.cpu_model = "AMD EPYC";
  e.compiler = "gcc 12";
  e.build_flags = "-O2";
  e.git_commit = "abc123";
  e.hostname = "node1";
  e.git_dirty = true;
  EXPECT_EQ(e.fingerprint(), "ae0612430ed27c62");
}

// Each run row's checksum is stored and recomputed by `harness check-db`: a run stored before must still match.
// Expected value: FNV-1a 64 from kFnv1a64StoredHashBasis over the columns and validation points, each followed by
// 0x1f (doubles as %.17g), computed independently.
TEST(Store, RunChecksumKeepsItsStoredValue) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  const auto sweep = store.create_sweep(sweep_named("s", "record"));
  ASSERT_EQ(sweep, 1);
  RunRecord r = sample_run(sweep, 7);
  r.final_val_loss = 3.25;
  r.train_time_ms = 1000;
  r.val_points = {{0, 10.75, 0.0}, {1390, 3.25, 1000.0}};
  const auto id = store.add_run(r);
  const auto rows = store.db().query("SELECT checksum FROM runs WHERE id = " + std::to_string(id));
  ASSERT_EQ(rows.rows.size(), 1u);
  EXPECT_EQ(sql::to_string(rows.rows[0][0]), "2890f27a8423bd26");
  const auto report = store.check_run_checksums();
  EXPECT_EQ(report.checked, 1);
}

TEST(Store, BenchmarkHistoryIsOrderedByTime) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  store.add_benchmark_result(bench("kernels", "rmsnorm", 2.0, "2025-01-02T00:00:00Z", "b"));
  store.add_benchmark_result(bench("kernels", "rmsnorm", 1.0, "2025-01-01T00:00:00Z", "a"));
  store.add_benchmark_result(bench("other", "rmsnorm", 9.0, ""));
  auto h = store.benchmark_history("kernels/rmsnorm");
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h[0].revision, "a");
  EXPECT_DOUBLE_EQ(h[1].value, 2.0);
  EXPECT_EQ(store.benchmark_history("rmsnorm").size(), 3u);
  EXPECT_TRUE(store.benchmark_history("nothing").empty());
}

TEST(Store, ParamsMetricsAndTags) {
  TempDir dir;
  Store store = Store::open(dir / "r.db");
  store.set_param(OwnerKind::sweep, 1, "data", "data/default");
  store.set_param(OwnerKind::sweep, 1, "data", "data/other");  // overwrites
  store.set_metric(OwnerKind::run, 1, "hellaswag", 0.3);
  store.add_tag(OwnerKind::run, 1, "baseline");
  store.add_tag(OwnerKind::run, 1, "baseline");
  EXPECT_EQ(store.params(OwnerKind::sweep, 1).at("data"), "data/other");
  EXPECT_TRUE(store.params(OwnerKind::run, 1).empty());
  EXPECT_DOUBLE_EQ(store.metrics(OwnerKind::run, 1).at("hellaswag"), 0.3);
  EXPECT_EQ(store.tags(OwnerKind::run, 1), std::vector<std::string>{"baseline"});
}

TEST(Store, CorruptFileGivesAClearMessage) {
  TempDir dir;
  const auto file = dir.write("bad.db", std::string(4096, 'x'));
  const std::string message = error_of([&] { Store::open(file); });
  EXPECT_NE(message.find("is not a valid SQLite database"), std::string::npos) << message;
  EXPECT_NE(message.find("bad.db"), std::string::npos) << message;
}

TEST(Store, LockedDatabaseGivesAClearMessage) {
  TempDir dir;
  Store holder = Store::open(dir / "r.db");
  holder.db().exec("BEGIN IMMEDIATE");
  Store other = Store::open(dir / "r.db", sql::OpenOptions{false, 50});
  const std::string message = error_of([&] { other.create_sweep(sweep_named("x", "record")); });
  EXPECT_NE(message.find("is locked by another process"), std::string::npos) << message;
  EXPECT_NE(message.find("50 ms"), std::string::npos) << message;
  // Readers are not blocked by the writer (WAL).
  EXPECT_TRUE(other.sweeps().empty());
  holder.db().exec("ROLLBACK");
}

TEST(Store, NewerSchemaIsRefused) {
  TempDir dir;
  {
    Store store = Store::open(dir / "r.db");
    store.db().set_user_version(latest_schema_version() + 1);
  }
  EXPECT_NE(error_of([&] { Store::open(dir / "r.db"); }).find("newer than this harness"), std::string::npos);
}

TEST(Store, ReadOnlyRefusesWritesAndMissingFile) {
  TempDir dir;
  { Store::open(dir / "r.db").create_sweep(sweep_named("s", "record")); }
  Store ro = Store::open(dir / "r.db", sql::OpenOptions{true, 5000});
  EXPECT_EQ(ro.sweeps().size(), 1u);
  EXPECT_THROW(ro.db().exec("DELETE FROM sweeps"), gpt::Error);
  EXPECT_NE(error_of([&] {
              Store::open(dir / "none.db", sql::OpenOptions{true, 5000});
            }).find("no database at"),
            std::string::npos);
}

TEST(Store, DbPathResolution) {
  ::unsetenv("SPEEDRUN_DB");
  EXPECT_EQ(resolve_db_path(""), std::filesystem::path("results/speedrun.db"));
  ::setenv("SPEEDRUN_DB", "/tmp/x.db", 1);
  EXPECT_EQ(resolve_db_path(""), std::filesystem::path("/tmp/x.db"));
  EXPECT_EQ(resolve_db_path("mine.db"), std::filesystem::path("mine.db"));
  ::unsetenv("SPEEDRUN_DB");
}

}  // namespace
}  // namespace gpt::harness

namespace gpt::harness {
namespace {

TEST(StoreTrust, UniqueSweepNamesAreChosenUnderTheLock) {
  testing::TempDir dir;
  Store store = Store::open(dir / "r.db");
  SweepInfo a = sweep_named("record-tiny-x");
  SweepInfo b = sweep_named("record-tiny-x");
  store.create_sweep_unique(a);
  store.create_sweep_unique(b);
  EXPECT_EQ(a.name, "record-tiny-x");
  EXPECT_EQ(b.name, "record-tiny-x-2");
  EXPECT_NE(a.id, b.id);
}

// An import wraps many writes in one transaction: the inner ones become savepoints and an exception rolls
// the whole unit back.
TEST(StoreTrust, NestedTransactionsRollBackTogether) {
  testing::TempDir dir;
  Store store = Store::open(dir / "r.db");
  try {
    sql::Transaction outer(store.db());
    SweepInfo s = sweep_named("partial");
    store.create_sweep_unique(s);  // its own transaction, nested
    RunRecord r;
    r.sweep_id = s.id;
    r.run_id = "a";
    store.add_run(r);
    throw gpt::Error("killed halfway");
  } catch (const gpt::Error&) {
  }
  EXPECT_TRUE(store.sweeps().empty());
  EXPECT_TRUE(store.runs(std::nullopt).empty());
}

TEST(StoreTrust, RunProvenanceIsStoredWithTheRun) {
  testing::TempDir dir;
  Store store = Store::open(dir / "r.db");
  SweepInfo s = sweep_named("s");
  store.create_sweep_unique(s);
  RunRecord r;
  r.sweep_id = s.id;
  r.run_id = "a";
  r.environment = Environment{};
  r.environment->git_commit = "abc";
  r.params["recipe_hash"] = "h";
  const auto id = store.add_run(r);
  const auto stored = store.run(id);
  ASSERT_TRUE(stored->environment_id);
  EXPECT_EQ(store.environment(*stored->environment_id)->git_commit, "abc");
  EXPECT_EQ(store.params(OwnerKind::run, id).at("recipe_hash"), "h");
}

TEST(StoreTrust, SpoolFileRoundTripsARun) {
  testing::TempDir dir;
  RunRecord r;
  r.sweep_id = 3;
  r.arm = "x";
  r.seed = 5;
  r.run_id = "s-seed5";
  r.status = RunStatus::diverged;
  r.final_val_loss = std::nan("");
  r.steps = 7;
  r.total_steps = 10;
  r.reason = "final val loss is nan";
  r.val_points = {{0, 10.8, 0.0}, {5, 4.5, std::nullopt}};
  r.params["recipe_hash"] = "h";
  write_spool(dir / "run.spool.json", r, "");
  const RunRecord back = read_spool(dir / "run.spool.json");
  EXPECT_EQ(back.run_id, r.run_id);
  EXPECT_EQ(back.status, RunStatus::diverged);
  EXPECT_TRUE(back.final_val_loss && std::isnan(*back.final_val_loss));
  EXPECT_EQ(back.seed, 5);
  ASSERT_EQ(back.val_points.size(), 2u);
  EXPECT_FALSE(back.val_points[1].train_time_ms);
  EXPECT_EQ(back.params.at("recipe_hash"), "h");
  dir.write("bad.json", "{\"sweep_id\": 1");
  EXPECT_THROW(read_spool(dir / "bad.json"), gpt::Error);
}

// Seed 0 of sweep `sweep_id` ("sw"), finished with val loss 3.25.
RunRecord finished_run(std::int64_t sweep_id) {
  RunRecord r;
  r.sweep_id = sweep_id;
  r.seed = 0;
  r.run_id = "sw-seed0";
  r.status = RunStatus::ok;
  r.final_val_loss = 3.25;
  return r;
}

TEST(StoreTrust, SpooledRunsAreStoredAndRemoved) {
  testing::TempDir dir;
  Store store = Store::open(dir / "r.db");
  SweepInfo s = sweep_named("sw");
  store.create_sweep_unique(s);
  const RunRecord r = finished_run(s.id);
  std::filesystem::create_directories(dir / "runs" / "sw" / "sw-seed0");
  write_spool(dir / "runs" / "sw" / "sw-seed0" / kSpoolFileName, r, store.database_id());
  // A spool of another database's sweep (same id, other name) is left alone.
  std::filesystem::create_directories(dir / "runs" / "other" / "o-seed0");
  write_spool(dir / "runs" / "other" / "o-seed0" / kSpoolFileName, r, "");
  EXPECT_EQ(store_spooled_runs(store, dir / "runs"), 1);
  EXPECT_EQ(store.runs(s.id).size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir / "runs" / "sw" / "sw-seed0" / kSpoolFileName));
  EXPECT_TRUE(std::filesystem::exists(dir / "runs" / "other" / "o-seed0" / kSpoolFileName));
}

// Two databases in one folder share its runs/ folder, and each may hold a sweep with the same id and name: a run
// spooled for one is stored into that one only, whichever writing command runs first; a spool without an identity
// (written before databases had one) still goes by sweep id and folder name.
TEST(StoreTrust, SpooledRunsGoOnlyToTheDatabaseTheyWereMadeFor) {
  testing::TempDir dir;
  Store a = Store::open(dir / "a.db"), b = Store::open(dir / "b.db");
  ASSERT_NE(a.database_id(), b.database_id());
  EXPECT_EQ(a.database_id().size(), 32u);
  SweepInfo sa = sweep_named("sw"), sb = sweep_named("sw");
  a.create_sweep_unique(sa);
  b.create_sweep_unique(sb);
  ASSERT_EQ(sa.id, sb.id);
  const RunRecord r = finished_run(sa.id);
  const auto spool = dir / "runs" / "sw" / "sw-seed0" / kSpoolFileName;
  std::filesystem::create_directories(spool.parent_path());
  write_spool(spool, r, a.database_id());
  EXPECT_EQ(read_spool_file(spool).database_id, a.database_id());
  EXPECT_EQ(store_spooled_runs(b, dir / "runs"), 0);
  EXPECT_TRUE(b.runs(sb.id).empty());
  EXPECT_TRUE(std::filesystem::exists(spool));
  EXPECT_EQ(store_spooled_runs(a, dir / "runs"), 1);
  EXPECT_EQ(a.runs(sa.id).size(), 1u);
  write_spool(spool, r, "");
  EXPECT_EQ(store_spooled_runs(b, dir / "runs"), 1);
  EXPECT_EQ(b.runs(sb.id).size(), 1u);
}

// Tracked change points: stored, updated in place, and one row per (benchmark, GPU, first slower night) even when
// a night is decided again.
TEST(StoreChangePoints, SavedUpdatedAndNeverDoubled) {
  TempDir dir;
  Store store = Store::open(dir / "h.db");
  ChangePointRecord r{0,
                      "bench",
                      "BM_X",
                      "NVIDIA H200",
                      "2026-12-08T12:00:00Z",
                      "bad1dea",
                      "2026-12-08T12:00:00Z",
                      "bad1dea",
                      100.0,
                      0.05,
                      0.02,
                      "open",
                      ""};
  r.id = save_change_point(store, r);
  EXPECT_GT(r.id, 0);
  r.status = "resolved";
  r.resolved_night = "2026-12-12T12:00:00Z";
  EXPECT_EQ(save_change_point(store, r), r.id);
  ChangePointRecord again = r;
  again.id = 0;
  again.status = "confirmed";
  again.resolved_night.clear();
  EXPECT_EQ(save_change_point(store, again), r.id);
  const auto stored = load_change_points(store, "bench", "BM_X", "NVIDIA H200");
  ASSERT_EQ(stored.size(), 1u);
  EXPECT_EQ(stored[0].status, "confirmed");
  EXPECT_EQ(stored[0].start_commit, "bad1dea");
  EXPECT_TRUE(load_change_points(store, "bench", "BM_X", "").empty());  // another GPU model's series
  EXPECT_EQ(load_change_points(store).size(), 1u);
}

}  // namespace
}  // namespace gpt::harness
