#include "harness/store/store.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "harness/store/run_checks.h"
#include "harness/store/schema.h"
#include "base/check.h"
#include "base/fnv1a.h"

namespace gpt::harness {

std::filesystem::path resolve_db_path(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("SPEEDRUN_DB"); env != nullptr && *env != '\0') return env;
  return std::string(kDefaultDbPath);
}

namespace {
constexpr std::string_view kStatusNames[] = {"ok", "failed", "diverged", "timeout", "killed", "incomplete"};

std::string_view owner_name(OwnerKind kind) {
  switch (kind) {
    case OwnerKind::sweep:
      return "sweep";
    case OwnerKind::run:
      return "run";
    case OwnerKind::benchmark:
      return "benchmark";
  }
  return "run";
}

constexpr std::string_view kRunColumns =
    "id, sweep_id, arm, seed, run_id, status, exit_code, final_val_loss, train_time_ms, steps, total_steps, "
    "tokens, peak_memory_mib, log_path, reason, wall_time_s, environment_id, finished_at";

RunRecord read_run(const sql::Statement& s) {
  RunRecord r;
  r.id = s.column_int(0);
  r.sweep_id = s.column_int(1);
  r.arm = s.column_text(2);
  r.seed = s.column_opt_int(3);
  r.run_id = s.column_text(4);
  r.status = parse_run_status(s.column_text(5));
  if (auto code = s.column_opt_int(6)) r.exit_code = static_cast<int>(*code);
  r.final_val_loss = s.column_opt_double(7);
  r.train_time_ms = s.column_opt_double(8);
  r.steps = s.column_opt_int(9);
  r.total_steps = s.column_opt_int(10);
  r.tokens = s.column_opt_int(11);
  r.peak_memory_mib = s.column_opt_double(12);
  r.log_path = s.column_text(13);
  r.reason = s.column_text(14);
  r.wall_time_s = s.column_opt_double(15);
  r.environment_id = s.column_opt_int(16);
  r.finished_at = s.column_text(17);
  return r;
}

constexpr std::string_view kSweepColumns =
    "id, name, kind, recipe, command, target, alpha, runs_planned, gpus, environment_id, created_at";

// The checksum of a run as stored: FNV-1a 64 over its columns (doubles to 17 digits, absent values as '-') and
// its validation points, in a fixed order. What add_run wrote and what a later read finds must give the same.
std::string run_checksum(const RunRecord& r, const std::vector<ValPoint>& points) {
  std::string text;
  auto add = [&](const std::string& field) { text += field + '\x1f'; };
  auto opt_int = [&](const std::optional<std::int64_t>& v) { add(v ? std::to_string(*v) : "-"); };
  auto real = [&](std::optional<double> v) {
    char buf[40] = "-";
    if (v) std::snprintf(buf, sizeof buf, "%.17g", *v);
    add(buf);
  };
  add(std::to_string(r.sweep_id));
  add(r.arm);
  opt_int(r.seed);
  add(r.run_id);
  add(std::string(to_string(r.status)));
  opt_int(r.exit_code ? std::optional<std::int64_t>(*r.exit_code) : std::nullopt);
  real(r.final_val_loss);
  real(r.train_time_ms);
  opt_int(r.steps);
  opt_int(r.total_steps);
  opt_int(r.tokens);
  real(r.peak_memory_mib);
  add(r.log_path);
  add(r.reason);
  real(r.wall_time_s);
  opt_int(r.environment_id);
  for (const ValPoint& p : points) {
    opt_int(p.step);
    real(p.val_loss);
    real(p.train_time_ms);
  }
  return fnv1a64_hex(text, kFnv1a64StoredHashBasis);  // existing databases hold checksums made with it
}

SweepInfo read_sweep(const sql::Statement& s) {
  SweepInfo w;
  w.id = s.column_int(0);
  w.name = s.column_text(1);
  w.kind = s.column_text(2);
  w.recipe = s.column_text(3);
  w.command = s.column_text(4);
  w.target = s.column_opt_double(5);
  w.alpha = s.column_opt_double(6);
  w.runs_planned = static_cast<int>(s.column_int(7));
  w.gpus = static_cast<int>(s.column_int(8));
  w.environment_id = s.column_opt_int(9);
  w.created_at = s.column_text(10);
  return w;
}
}  // namespace

std::string_view to_string(RunStatus status) { return kStatusNames[static_cast<int>(status)]; }

RunStatus parse_run_status(std::string_view text) {
  for (size_t i = 0; i < std::size(kStatusNames); ++i) {
    if (kStatusNames[i] == text) return static_cast<RunStatus>(i);
  }
  GPT_FAIL("unknown run status '", text, "' (expected ok, failed, diverged, timeout, killed or incomplete)");
}

std::string Environment::fingerprint() const {
  // FNV-1a over the fields, separated by a byte that cannot occur in them.
  std::uint64_t hash = kFnv1a64StoredHashBasis;  // environment rows are found by the fingerprints stored before
  auto mix = [&](std::string_view field) { hash = fnv1a64("\x1f", fnv1a64(field, hash)); };
  for (const std::string* f :
       {&gpu, &driver, &cuda, &nccl, &cpu_model, &compiler, &build_flags, &git_commit, &hostname}) {
    mix(*f);
  }
  mix(git_dirty ? "dirty" : "clean");
  return hex64(hash);
}

Store Store::open(const std::filesystem::path& path, const sql::OpenOptions& options) {
  sql::Database db = sql::Database::open(path, options);
  migrate(db);
  return Store(std::move(db));
}

std::int64_t Store::upsert_environment(const Environment& env) {
  const std::string fp = env.fingerprint();
  sql::Transaction tx(db_);
  auto find = db_.prepare("SELECT id FROM environments WHERE fingerprint = ?");
  find.bind(1, fp);
  if (find.step()) return find.column_int(0);  // the transaction rolls back: nothing was written
  auto insert = db_.prepare(
      "INSERT INTO environments (fingerprint, gpu, driver, cuda, nccl, cpu_model, compiler, build_flags, "
      "git_commit, git_dirty, hostname) VALUES (?,?,?,?,?,?,?,?,?,?,?)");
  insert.bind(1, fp).bind(2, env.gpu).bind(3, env.driver).bind(4, env.cuda).bind(5, env.nccl);
  insert.bind(6, env.cpu_model).bind(7, env.compiler).bind(8, env.build_flags).bind(9, env.git_commit);
  insert.bind(10, env.git_dirty ? 1 : 0).bind(11, env.hostname);
  insert.run();
  const std::int64_t id = db_.last_insert_rowid();
  tx.commit();
  return id;
}

std::optional<Environment> Store::environment(std::int64_t id) {
  auto s = db_.prepare(
      "SELECT gpu, driver, cuda, nccl, cpu_model, compiler, build_flags, git_commit, git_dirty, hostname "
      "FROM environments WHERE id = ?");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  Environment e;
  e.gpu = s.column_text(0);
  e.driver = s.column_text(1);
  e.cuda = s.column_text(2);
  e.nccl = s.column_text(3);
  e.cpu_model = s.column_text(4);
  e.compiler = s.column_text(5);
  e.build_flags = s.column_text(6);
  e.git_commit = s.column_text(7);
  e.git_dirty = s.column_int(8) != 0;
  e.hostname = s.column_text(9);
  return e;
}

std::int64_t Store::create_sweep(SweepInfo sweep) {
  GPT_CHECK(!sweep.name.empty(), "a sweep needs a name");
  GPT_CHECK(!sweep.kind.empty(), "sweep '", sweep.name, "' needs a kind");
  sql::Transaction tx(db_);
  auto exists = db_.prepare("SELECT id FROM sweeps WHERE name = ?");
  exists.bind(1, sweep.name);
  GPT_CHECK(!exists.step(), "database '", db_.path().string(), "': a sweep named '", sweep.name, "' already exists");
  auto s = db_.prepare(
      "INSERT INTO sweeps (name, kind, recipe, command, target, alpha, runs_planned, gpus, environment_id) "
      "VALUES (?,?,?,?,?,?,?,?,?)");
  s.bind(1, sweep.name).bind(2, sweep.kind).bind(3, sweep.recipe).bind(4, sweep.command);
  s.bind(5, sweep.target).bind(6, sweep.alpha).bind(7, sweep.runs_planned).bind(8, sweep.gpus);
  s.bind(9, sweep.environment_id);
  s.run();
  const std::int64_t id = db_.last_insert_rowid();
  tx.commit();
  return id;
}

std::int64_t Store::create_sweep_unique(SweepInfo& sweep, bool name_given) {
  GPT_CHECK(!sweep.name.empty(), "a sweep needs a name");
  sql::Transaction tx(db_);
  const std::string base = sweep.name;
  auto exists = db_.prepare("SELECT 1 FROM sweeps WHERE name = ?");
  for (int i = 2;; ++i) {
    exists.reset();
    exists.bind(1, sweep.name);
    if (!exists.step()) break;
    GPT_CHECK(!name_given, "--name: a sweep named '", base,
              "' already exists; choose another name (record and compare continue a sweep with --resume ", base, ")");
    sweep.name = base + "-" + std::to_string(i);
  }
  sweep.id = create_sweep(sweep);
  tx.commit();
  return sweep.id;
}

void Store::set_runs_planned(std::int64_t sweep_id, int runs_planned) {
  auto s = db_.prepare("UPDATE sweeps SET runs_planned = ? WHERE id = ?");
  s.bind(1, runs_planned).bind(2, sweep_id);
  s.run();
}

std::string Store::database_id() {
  auto s = db_.prepare("SELECT id FROM store_identity LIMIT 1");
  GPT_CHECK(s.step(), "database '", db_.path().string(), "' has no identity (table store_identity is empty)");
  return s.column_text(0);
}

std::optional<SweepInfo> Store::find_sweep(std::string_view id_or_name) {
  auto by_name = db_.prepare("SELECT " + std::string(kSweepColumns) + " FROM sweeps WHERE name = ?");
  by_name.bind(1, id_or_name);
  if (by_name.step()) return read_sweep(by_name);
  char* end = nullptr;
  const std::string text(id_or_name);
  const long long id = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size()) return std::nullopt;
  auto by_id = db_.prepare("SELECT " + std::string(kSweepColumns) + " FROM sweeps WHERE id = ?");
  by_id.bind(1, static_cast<std::int64_t>(id));
  if (by_id.step()) return read_sweep(by_id);
  return std::nullopt;
}

std::vector<SweepInfo> Store::sweeps() {
  auto s = db_.prepare("SELECT " + std::string(kSweepColumns) + " FROM sweeps ORDER BY id");
  std::vector<SweepInfo> out;
  while (s.step()) out.push_back(read_sweep(s));
  return out;
}

std::int64_t Store::add_run(const RunRecord& given, bool replace) {
  GPT_CHECK(!given.run_id.empty(), "a run needs a run id");
  RunRecord run = given;
  demote_unusable_result(run);  // whoever stores it (record, import, a spool file), an unusable result is not ok
  sql::Transaction tx(db_);
  if (replace && run.seed) {
    auto del = db_.prepare("DELETE FROM runs WHERE sweep_id = ? AND arm = ? AND seed = ?");
    del.bind(1, run.sweep_id).bind(2, run.arm).bind(3, *run.seed);
    del.run();
  }
  auto s = db_.prepare(
      "INSERT INTO runs (sweep_id, arm, seed, run_id, status, exit_code, final_val_loss, train_time_ms, steps, "
      "total_steps, tokens, peak_memory_mib, log_path, reason, wall_time_s, environment_id) "
      "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
  s.bind(1, run.sweep_id).bind(2, run.arm).bind(3, run.seed).bind(4, run.run_id).bind(5, to_string(run.status));
  s.bind(6, run.exit_code).bind(7, run.final_val_loss).bind(8, run.train_time_ms).bind(9, run.steps);
  s.bind(10, run.total_steps).bind(11, run.tokens).bind(12, run.peak_memory_mib).bind(13, run.log_path);
  std::optional<std::int64_t> environment_id = run.environment_id;
  if (run.environment) environment_id = upsert_environment(*run.environment);
  s.bind(14, run.reason).bind(15, run.wall_time_s).bind(16, environment_id);
  s.run();
  const std::int64_t id = db_.last_insert_rowid();
  for (const auto& [key, value] : run.params) set_param(OwnerKind::run, id, key, value);
  auto point = db_.prepare("INSERT OR REPLACE INTO val_points (run, step, val_loss, train_time_ms) VALUES (?,?,?,?)");
  for (const ValPoint& p : run.val_points) {
    // SQLite turns NaN into NULL; a non-finite point is left out (the run's status and reason carry it).
    if (!std::isfinite(p.val_loss)) continue;
    point.reset();
    point.bind(1, id).bind(2, p.step).bind(3, p.val_loss).bind(4, p.train_time_ms);
    point.run();
  }
  // The checksum of what was stored, read back as check_run_checksums will read it (finished_at is left out).
  const RunRecord stored = [&] {
    auto back = db_.prepare("SELECT " + std::string(kRunColumns) + " FROM runs WHERE id = ?");
    back.bind(1, id);
    GPT_CHECK(back.step(), "internal: run ", id, " vanished inside its own transaction");
    return read_run(back);
  }();
  auto sum = db_.prepare("UPDATE runs SET checksum = ? WHERE id = ?");
  sum.bind(1, run_checksum(stored, val_points(id))).bind(2, id);
  sum.run();
  tx.commit();
  return id;
}

std::vector<RunRecord> Store::runs(std::optional<std::int64_t> sweep_id, bool with_val_points) {
  std::string text = "SELECT " + std::string(kRunColumns) + " FROM runs";
  if (sweep_id) text += " WHERE sweep_id = ?";
  text += " ORDER BY sweep_id, arm, seed, id";
  auto s = db_.prepare(text);
  if (sweep_id) s.bind(1, *sweep_id);
  std::vector<RunRecord> out;
  while (s.step()) out.push_back(read_run(s));
  for (RunRecord& r : out) {
    if (with_val_points) r.val_points = val_points(r.id);
    demote_unusable_result(r);  // a row stored before the checks (or edited since) never breaks a report
  }
  return out;
}

Store::ChecksumReport Store::check_run_checksums() {
  ChecksumReport report;
  auto s = db_.prepare("SELECT " + std::string(kRunColumns) + ", checksum FROM runs ORDER BY id");
  while (s.step()) {
    const RunRecord r = read_run(s);  // as stored: no result checks applied
    const std::string stored = s.column_text(18);
    if (stored.empty()) {
      ++report.unchecked;
    } else if (stored == run_checksum(r, val_points(r.id))) {
      ++report.checked;
    } else {
      report.mismatches.push_back("run " + std::to_string(r.id) + " (sweep " + std::to_string(r.sweep_id) +
                                  ", run id " + r.run_id + ")");
    }
  }
  return report;
}

std::optional<RunRecord> Store::run(std::int64_t id, bool with_val_points) {
  auto s = db_.prepare("SELECT " + std::string(kRunColumns) + " FROM runs WHERE id = ?");
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  RunRecord r = read_run(s);
  if (with_val_points) r.val_points = val_points(id);
  demote_unusable_result(r);
  return r;
}

std::vector<ValPoint> Store::val_points(std::int64_t run_id) {
  auto s = db_.prepare("SELECT step, val_loss, train_time_ms FROM val_points WHERE run = ? ORDER BY step");
  s.bind(1, run_id);
  std::vector<ValPoint> out;
  while (s.step()) out.push_back({s.column_int(0), s.column_double(1), s.column_opt_double(2)});
  return out;
}

std::int64_t Store::add_benchmark_result(const BenchmarkResult& r) {
  GPT_CHECK(!r.suite.empty() && !r.name.empty(), "a benchmark result needs a suite and a name");
  GPT_CHECK(std::isfinite(r.value), "benchmark ", r.suite, "/", r.name, ": value ", r.value,
            " is not finite (a stored inf or NaN breaks every later decision over its history)");
  auto s = db_.prepare(
      "INSERT INTO benchmark_results (suite, name, run, revision, value, unit, repetitions, recorded_at, "
      "environment_id) VALUES (?,?,?,?,?,?,?,COALESCE(?, strftime('%Y-%m-%dT%H:%M:%SZ','now')),?)");
  s.bind(1, r.suite).bind(2, r.name).bind(3, r.run).bind(4, r.revision).bind(5, r.value).bind(6, r.unit);
  s.bind(7, r.repetitions);
  if (r.recorded_at.empty())
    s.bind_null(8);
  else
    s.bind(8, r.recorded_at);
  s.bind(9, r.environment_id);
  s.run();
  return db_.last_insert_rowid();
}

bool Store::has_benchmark_night(std::string_view suite, std::string_view name, std::string_view recorded_at) {
  auto s = db_.prepare("SELECT 1 FROM benchmark_results WHERE suite = ? AND name = ? AND recorded_at = ? LIMIT 1");
  s.bind(1, suite).bind(2, name).bind(3, recorded_at);
  return s.step();
}

std::vector<BenchmarkResult> Store::benchmark_history(std::string_view name) {
  const auto slash = name.find('/');
  if (slash != std::string_view::npos) {
    auto in_suite = benchmark_history(name.substr(0, slash), name.substr(slash + 1));
    if (!in_suite.empty()) return in_suite;
  }
  return benchmark_history(std::nullopt, name);
}

std::vector<BenchmarkResult> Store::benchmark_history(std::optional<std::string_view> suite, std::string_view name,
                                                      std::optional<std::string_view> gpu) {
  std::string sql =
      "SELECT id, suite, name, run, revision, value, unit, repetitions, recorded_at, environment_id "
      "FROM benchmark_results WHERE ";
  sql += suite ? "suite = ? AND name = ?" : "name = ?";
  if (gpu) sql += " AND COALESCE((SELECT gpu FROM environments WHERE environments.id = environment_id), '') = ?";
  sql += " ORDER BY recorded_at, id";
  auto s = db_.prepare(sql);
  int next = 1;
  if (suite) s.bind(next++, *suite);
  s.bind(next++, name);
  if (gpu) s.bind(next++, *gpu);
  std::vector<BenchmarkResult> out;
  while (s.step()) {
    BenchmarkResult r;
    r.id = s.column_int(0);
    r.suite = s.column_text(1);
    r.name = s.column_text(2);
    r.run = s.column_opt_int(3);
    r.revision = s.column_text(4);
    r.value = s.column_double(5);
    r.unit = s.column_text(6);
    r.repetitions = static_cast<int>(s.column_int(7));
    r.recorded_at = s.column_text(8);
    r.environment_id = s.column_opt_int(9);
    out.push_back(std::move(r));
  }
  return out;
}

void Store::set_param(OwnerKind kind, std::int64_t owner, std::string_view key, std::string_view value) {
  auto s = db_.prepare("INSERT OR REPLACE INTO params (owner_kind, owner_id, key, value) VALUES (?,?,?,?)");
  s.bind(1, owner_name(kind)).bind(2, owner).bind(3, key).bind(4, value);
  s.run();
}

void Store::set_metric(OwnerKind kind, std::int64_t owner, std::string_view key, double value) {
  auto s = db_.prepare("INSERT OR REPLACE INTO metrics (owner_kind, owner_id, key, value) VALUES (?,?,?,?)");
  s.bind(1, owner_name(kind)).bind(2, owner).bind(3, key).bind(4, value);
  s.run();
}

void Store::add_tag(OwnerKind kind, std::int64_t owner, std::string_view tag) {
  auto s = db_.prepare("INSERT OR IGNORE INTO tags (owner_kind, owner_id, tag) VALUES (?,?,?)");
  s.bind(1, owner_name(kind)).bind(2, owner).bind(3, tag);
  s.run();
}

std::map<std::string, std::string> Store::params(OwnerKind kind, std::int64_t owner) {
  auto s = db_.prepare("SELECT key, value FROM params WHERE owner_kind = ? AND owner_id = ?");
  s.bind(1, owner_name(kind)).bind(2, owner);
  std::map<std::string, std::string> out;
  while (s.step()) out[s.column_text(0)] = s.column_text(1);
  return out;
}

std::map<std::string, double> Store::metrics(OwnerKind kind, std::int64_t owner) {
  auto s = db_.prepare("SELECT key, value FROM metrics WHERE owner_kind = ? AND owner_id = ?");
  s.bind(1, owner_name(kind)).bind(2, owner);
  std::map<std::string, double> out;
  while (s.step()) out[s.column_text(0)] = s.column_double(1);
  return out;
}

std::vector<std::string> Store::tags(OwnerKind kind, std::int64_t owner) {
  auto s = db_.prepare("SELECT tag FROM tags WHERE owner_kind = ? AND owner_id = ? ORDER BY tag");
  s.bind(1, owner_name(kind)).bind(2, owner);
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.column_text(0));
  return out;
}

}  // namespace gpt::harness
