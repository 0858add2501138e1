// `harness query`: sweeps, runs, benchmark history, environments, or any read-only SQL.
#include "harness/commands/query.h"

#include <cmath>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "harness/commands/common.h"
#include "harness/report/table_format.h"
#include "base/check.h"

namespace gpt::harness {

namespace {

struct QueryOptions {
  std::string format = "table";
  std::string sweep;
  std::string bench;
  std::string bench_name;                // --name: exact benchmark name (may contain '/')
  std::string bench_suite;               // --suite: limits --name to one suite
  std::optional<std::string> bench_gpu;  // --gpu: only results measured on this GPU model ("" = none named)
  std::int64_t env_id = 0;
  std::string sql;
};

int print(const sql::Table& table, const QueryOptions& o) {
  std::cout << format_table(table, o.format);
  return kExitPass;
}

// Both tables are built from Store::runs(), which reads a run back through the store's checks: a row stored `ok`
// whose values break them (a loss edited to -3) is `failed` here as in every report, never counted as ok.
sql::Value optional_value(const std::optional<double>& v) { return v ? sql::Value(*v) : sql::Value(std::monostate{}); }
sql::Value optional_value(const std::optional<std::int64_t>& v) {
  return v ? sql::Value(*v) : sql::Value(std::monostate{});
}

// One row per sweep; its mean final val loss over the ok runs only where the sweep has one arm (the arms of a
// comparison or of a split import are different experiments: one mean over them describes neither).
sql::Table sweeps_table(Store& store) {
  sql::Table table;
  table.columns = {"id",     "name", "kind", "recipe",        "created_at", "planned",
                   "stored", "ok",   "arms", "mean_val_loss", "target"};
  for (const SweepInfo& sweep : store.sweeps()) {
    const std::vector<RunRecord> runs = store.runs(sweep.id);
    std::set<std::string> arms;
    double sum = 0;
    std::int64_t ok = 0;
    for (const RunRecord& r : runs) {
      arms.insert(r.arm);
      if (r.status != RunStatus::ok || !r.final_val_loss) continue;
      ++ok;
      sum += *r.final_val_loss;
    }
    const sql::Value mean = ok > 0 && arms.size() == 1
                                ? sql::Value(std::round(sum / static_cast<double>(ok) * 1e4) / 1e4)
                                : sql::Value(std::monostate{});
    table.rows.push_back({sweep.id, sweep.name, sweep.kind, sweep.recipe, sweep.created_at,
                          static_cast<std::int64_t>(sweep.runs_planned), static_cast<std::int64_t>(runs.size()), ok,
                          static_cast<std::int64_t>(arms.size()), mean, optional_value(sweep.target)});
  }
  return table;
}

sql::Table runs_table(Store& store, const std::string& sweep) {
  std::optional<SweepInfo> only;
  if (!sweep.empty()) {
    only = store.find_sweep(sweep);
    GPT_CHECK(only.has_value(), "--sweep: no sweep '", sweep, "'");
  }
  std::map<std::int64_t, std::string> names;
  for (const SweepInfo& s : store.sweeps()) names[s.id] = s.name;
  // By sweep, arm and seed (Store::runs' order).
  const std::vector<RunRecord> runs = store.runs(only ? std::optional<std::int64_t>(only->id) : std::nullopt);
  sql::Table table;
  table.columns = {"id",          "sweep",          "arm",           "seed",  "run_id",      "status",
                   "exit_code",   "final_val_loss", "train_time_ms", "steps", "total_steps", "peak_memory_mib",
                   "finished_at", "reason"};
  for (const RunRecord& r : runs) {
    table.rows.push_back(
        {r.id, names[r.sweep_id], r.arm, optional_value(r.seed), r.run_id, std::string(to_string(r.status)),
         r.exit_code ? sql::Value(static_cast<std::int64_t>(*r.exit_code)) : sql::Value(std::monostate{}),
         optional_value(r.final_val_loss), optional_value(r.train_time_ms), optional_value(r.steps),
         optional_value(r.total_steps), optional_value(r.peak_memory_mib), r.finished_at, r.reason});
  }
  return table;
}

sql::Table history_table(Store& store, const QueryOptions& o) {
  GPT_CHECK(o.bench.empty() != o.bench_name.empty(),
            "query history: give the benchmark as SUITE/NAME or with --name NAME [--suite SUITE], not both");
  GPT_CHECK(o.bench_suite.empty() || !o.bench_name.empty(), "query history: --suite needs --name");
  const auto history =
      o.bench_name.empty()
          ? store.benchmark_history(o.bench)
          : store.benchmark_history(
                o.bench_suite.empty() ? std::nullopt : std::optional<std::string_view>(o.bench_suite), o.bench_name);
  // The GPU model of each row: figures of different GPUs are different series (nightly keeps them apart too).
  std::map<std::int64_t, std::string> gpu_of_environment;
  auto gpu_of = [&](const BenchmarkResult& b) -> std::string {
    if (!b.environment_id) return "";
    auto [it, fresh] = gpu_of_environment.try_emplace(*b.environment_id);
    if (fresh) {
      if (auto env = store.environment(*b.environment_id)) it->second = env->gpu;
    }
    return it->second;
  };
  sql::Table table;
  table.columns = {"id", "suite", "name", "revision", "value", "unit", "repetitions", "recorded_at", "run", "gpu"};
  for (const auto& b : history) {
    const std::string gpu = gpu_of(b);
    if (o.bench_gpu && gpu != *o.bench_gpu) continue;
    table.rows.push_back({b.id, b.suite, b.name, b.revision, b.value, b.unit, static_cast<std::int64_t>(b.repetitions),
                          b.recorded_at, b.run ? sql::Value(*b.run) : sql::Value(std::monostate{}), gpu});
  }
  return table;
}

sql::Table env_table(Store& store, std::int64_t id) {
  auto env = store.environment(id);
  GPT_CHECK(env.has_value(), "query env: no environment with id ", id);
  sql::Table table;
  table.columns = {"field", "value"};
  const std::pair<const char*, std::string> fields[] = {{"gpu", env->gpu},
                                                        {"driver", env->driver},
                                                        {"cuda", env->cuda},
                                                        {"nccl", env->nccl},
                                                        {"cpu_model", env->cpu_model},
                                                        {"compiler", env->compiler},
                                                        {"build_flags", env->build_flags},
                                                        {"git_commit", env->git_commit},
                                                        {"git_dirty", env->git_dirty ? "yes" : "no"},
                                                        {"hostname", env->hostname},
                                                        {"fingerprint", env->fingerprint()}};
  for (const auto& [k, v] : fields) table.rows.push_back({std::string(k), v});
  return table;
}

}  // namespace

void add_query_command(CLI::App& app, GlobalOptions& global) {
  auto o = std::make_shared<QueryOptions>();
  CLI::App* query = app.add_subcommand("query", "look back at stored sweeps, runs, benchmarks and environments");
  query->require_subcommand(1);
  query->add_option("--format", o->format, "output format")->check(CLI::IsMember({"table", "csv", "json"}));
  auto fmt = [&](CLI::App* sub) {
    sub->add_option("--format", o->format, "output format")->check(CLI::IsMember({"table", "csv", "json"}));
  };
  CLI::App* sweeps = query->add_subcommand("sweeps", "all sweeps with run counts");
  fmt(sweeps);
  sweeps->callback([o, &global] {
    Store store = open_store(global, /*read_only=*/true);
    global.exit_code = print(sweeps_table(store), *o);
  });
  CLI::App* runs = query->add_subcommand("runs", "runs (of one sweep with --sweep)");
  fmt(runs);
  runs->add_option("--sweep", o->sweep, "sweep id or name");
  runs->callback([o, &global] {
    Store store = open_store(global, /*read_only=*/true);
    global.exit_code = print(runs_table(store, o->sweep), *o);
  });
  CLI::App* history = query->add_subcommand("history", "results of one benchmark over time (SUITE/NAME or NAME)");
  fmt(history);
  history->add_option("bench", o->bench, "benchmark as SUITE/NAME (split at the first '/') or NAME");
  history->add_option("--name", o->bench_name, "exact benchmark name, which may contain '/' (e.g. BM_Matmul/1024)");
  history->add_option("--suite", o->bench_suite, "with --name: only this suite");
  history->add_option("--gpu", o->bench_gpu,
                      "only results measured on this GPU model, as stored (e.g. \"NVIDIA H200\"; "
                      "\"\" for results that name none)");
  history->callback([o, &global] {
    Store store = open_store(global, /*read_only=*/true);
    global.exit_code = print(history_table(store, *o), *o);
  });
  CLI::App* env = query->add_subcommand("env", "one environment fingerprint");
  fmt(env);
  env->add_option("id", o->env_id, "environment id")->required();
  env->callback([o, &global] {
    Store store = open_store(global, /*read_only=*/true);
    global.exit_code = print(env_table(store, o->env_id), *o);
  });
  CLI::App* sql = query->add_subcommand("sql", "any SQL statement, on a read-only connection");
  fmt(sql);
  sql->add_option("statement", o->sql, "SQL text")->required();
  sql->callback([o, &global] {
    Store store = open_store(global, /*read_only=*/true);
    // Read-only by its connection, and by the statement: VACUUM INTO would still write a new file.
    GPT_CHECK(store.db().prepare(o->sql).reads_only(),
              "query sql: runs read-only statements only (SELECT, WITH, "
              "PRAGMA that reads); '",
              o->sql.substr(0, 80), "' would write");
    global.exit_code = print(store.db().query(o->sql), *o);
  });
}

}  // namespace gpt::harness
