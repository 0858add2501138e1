#pragma once
// The results store: sweeps of seeded runs, their validation curves, environment fingerprints, benchmark
// results and free-form params/metrics/tags, in one SQLite file (WAL mode, so readers never block the
// sweep that is writing). Every write is its own transaction: a run is durable as soon as add_run returns.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/store/sqlite.h"

namespace gpt::harness {

// The database used when neither --db nor $SPEEDRUN_DB says otherwise.
inline constexpr std::string_view kDefaultDbPath = "results/speedrun.db";
// --db if given, else $SPEEDRUN_DB if set and non-empty, else kDefaultDbPath.
std::filesystem::path resolve_db_path(const std::string& flag_value);

enum class RunStatus { ok, failed, diverged, timeout, killed, incomplete };
std::string_view to_string(RunStatus status);
RunStatus parse_run_status(std::string_view text);  // throws on an unknown name

struct Environment {
  std::string gpu, driver, cuda, nccl, cpu_model, compiler, build_flags, git_commit;
  bool git_dirty = false;
  std::string hostname;
  std::string fingerprint() const;  // stable hash of all fields: equal environments share one row
};

struct SweepInfo {
  std::int64_t id = 0;
  std::string name;  // unique, human-readable (e.g. "record-tiny-20250101-120000")
  std::string kind;  // "record", "import", "compare", "nightly", ...
  std::string recipe;
  std::string command;  // the launched command line (JSON array of strings), empty for imports
  std::optional<double> target;
  std::optional<double> alpha;
  int runs_planned = 0;
  int gpus = 0;
  std::optional<std::int64_t> environment_id;
  std::string created_at;  // set by the database (UTC ISO-8601)
};

struct ValPoint {
  std::int64_t step = 0;
  double val_loss = 0;
  std::optional<double> train_time_ms;
};

struct RunRecord {
  std::int64_t id = 0;
  std::int64_t sweep_id = 0;
  std::string arm;  // "" for single-arm sweeps; imports use the folder name
  std::optional<std::int64_t> seed;
  std::string run_id;
  RunStatus status = RunStatus::incomplete;
  std::optional<int> exit_code;
  std::optional<double> final_val_loss;
  std::optional<double> train_time_ms;
  std::optional<std::int64_t> steps;        // the step of the final result (or the last step seen)
  std::optional<std::int64_t> total_steps;  // N of "step:s/N"
  std::optional<std::int64_t> tokens;
  std::optional<double> peak_memory_mib;
  std::string log_path;
  std::string reason;  // why a run is not ok (empty when ok)
  std::optional<double> wall_time_s;
  std::optional<std::int64_t> environment_id;
  std::string finished_at;           // set by the database
  std::vector<ValPoint> val_points;  // filled by add_run / runs(..., with_val_points=true)
  // Provenance written with the run by add_run (not read back by runs()): the trainer's own environment
  // (its commit, GPU; replaces environment_id when set) and run params such as recipe_hash, world_size.
  std::optional<Environment> environment;
  std::map<std::string, std::string> params;
};

struct BenchmarkResult {
  std::int64_t id = 0;
  std::string suite, name;
  std::optional<std::int64_t> run;  // the run it came from, if any
  std::string revision;             // git revision measured
  double value = 0;
  std::string unit;
  int repetitions = 1;
  std::string recorded_at;  // empty -> now (UTC ISO-8601); set explicitly to import history
  std::optional<std::int64_t> environment_id;
};

enum class OwnerKind { sweep, run, benchmark };

class Store {
 public:
  // Opens (creating and migrating if needed) the store. Read-only stores refuse every write.
  static Store open(const std::filesystem::path& path, const sql::OpenOptions& options = {});

  int schema_version() { return db_.user_version(); }
  // The database's random identity (made when its schema reached v4): spool files name the database they belong to.
  std::string database_id();
  sql::Database& db() { return db_; }

  std::int64_t upsert_environment(const Environment& env);  // returns the id of the matching row
  std::optional<Environment> environment(std::int64_t id);

  std::int64_t create_sweep(SweepInfo sweep);  // fails if the name is taken
  // Creates the sweep under `sweep.name`, or `name-2`, `name-3`, ... when taken (checked inside the write
  // lock, so two harnesses started in the same second get different names); sets sweep.id and sweep.name.
  // A name the user gave (`name_given`) is never changed: a taken one is an error naming --name.
  std::int64_t create_sweep_unique(SweepInfo& sweep, bool name_given = false);
  void set_runs_planned(std::int64_t sweep_id, int runs_planned);
  std::optional<SweepInfo> find_sweep(std::string_view id_or_name);
  std::vector<SweepInfo> sweeps();

  // Stores one finished run and its val points atomically; returns its id. If `replace` and a run with the
  // same (sweep, arm, seed) exists, that one is deleted first (a killed run re-run by --resume).
  std::int64_t add_run(const RunRecord& run, bool replace = false);
  std::vector<RunRecord> runs(std::optional<std::int64_t> sweep_id, bool with_val_points = false);
  std::optional<RunRecord> run(std::int64_t id, bool with_val_points = true);
  std::vector<ValPoint> val_points(std::int64_t run_id);

  // Recomputes every run's checksum (its stored values and validation points, as add_run wrote them) and
  // compares it with the stored one; `harness check-db` reports the result.
  struct ChecksumReport {
    std::int64_t checked = 0;             // runs whose checksum matched
    std::int64_t unchecked = 0;           // runs stored before checksums were kept
    std::vector<std::string> mismatches;  // "run 12 (sweep 3, run id x-seed0)" per run whose bytes changed
  };
  ChecksumReport check_run_checksums();

  std::int64_t add_benchmark_result(const BenchmarkResult& result);
  // Oldest first. `name` may be "suite/name" (split at the first '/'; benchmark names may hold more) or a
  // bare benchmark name (all suites); when the split finds nothing, the whole text is tried as a name.
  std::vector<BenchmarkResult> benchmark_history(std::string_view name);
  // Exact benchmark name, in one suite or (no suite) in all of them; with `gpu`, only the results measured on that
  // GPU model (its environment's gpu; "" = no GPU named, e.g. CPU benchmarks or results stored without one).
  std::vector<BenchmarkResult> benchmark_history(std::optional<std::string_view> suite, std::string_view name,
                                                 std::optional<std::string_view> gpu = std::nullopt);
  // Whether results of this benchmark are stored for this night stamp (the key of a night: a re-ingested file).
  bool has_benchmark_night(std::string_view suite, std::string_view name, std::string_view recorded_at);

  void set_param(OwnerKind kind, std::int64_t owner, std::string_view key, std::string_view value);
  void set_metric(OwnerKind kind, std::int64_t owner, std::string_view key, double value);
  void add_tag(OwnerKind kind, std::int64_t owner, std::string_view tag);
  std::map<std::string, std::string> params(OwnerKind kind, std::int64_t owner);
  std::map<std::string, double> metrics(OwnerKind kind, std::int64_t owner);
  std::vector<std::string> tags(OwnerKind kind, std::int64_t owner);

 private:
  explicit Store(sql::Database db) : db_(std::move(db)) {}
  sql::Database db_;
};

}  // namespace gpt::harness
