// `harness nightly`: builds the current revision, runs every Google Benchmark program with
// repetitions, runs a short training smoke run, stores it all, and flags regressions per benchmark
// (E-divisive over the stored history, latest-vs-previous Welch with Benjamini–Hochberg).
#include "harness/commands/nightly.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "harness/commands/subprocess.h"
#include "harness/nightly/regression.h"
#include "harness/store/store.h"
#include "kernels/check.h"

namespace gpt::harness::commands {
namespace fs = std::filesystem;
namespace {

struct NightlyOptions {
  std::string build_dir = "build", db, smoke_recipe = "tiny", data = "data", out_dir = "results/nightly";
  int repetitions = 5;
  int build_jobs = 2;
  bool skip_build = false;
  bool skip_smoke = false;
  nightly::RegressionOptions regression;
};

std::string utc_iso() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  GPT_CHECK(in.good(), path.string(), ": cannot read");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The stored history of one benchmark as nights (grouped by recorded_at, oldest first).
nightly::BenchmarkHistory history_of(Store& store, const std::string& full_name) {
  nightly::BenchmarkHistory h{full_name, {}};
  std::string current;
  for (const BenchmarkResult& r : store.benchmark_history(full_name)) {
    if (h.nights.empty() || r.recorded_at != current) {
      h.nights.emplace_back();
      current = r.recorded_at;
    }
    h.nights.back().push_back(r.value);
  }
  return h;
}

int run_nightly(const NightlyOptions& o) {
  const fs::path repo = capture_output({"git", "rev-parse", "--show-toplevel"});
  const std::string revision = capture_output({"git", "rev-parse", "HEAD"}, repo);
  const fs::path build = fs::absolute(repo / o.build_dir);
  const std::string night = utc_iso();
  const fs::path out = repo / o.out_dir / night;
  fs::create_directories(out);
  if (!o.skip_build) {
    const fs::path log = out / "build.log";
    int rc = fs::exists(build / "CMakeCache.txt")
                 ? 0
                 : run_process({{"cmake", "-S", repo.string(), "-B", build.string(), "-DCMAKE_BUILD_TYPE=Release"},
                                {}, log, log});
    if (rc == 0) rc = run_process({{"cmake", "--build", build.string(), "-j", std::to_string(o.build_jobs)}, {}, log, log});
    GPT_CHECK(rc == 0, "nightly: build failed (status ", rc, "); see ", log.string());
  }

  Store store = Store::open(resolve_db_path(o.db));
  std::vector<std::string> measured;
  bool failures = false;
  const fs::path bin = build / "bin";
  GPT_CHECK(fs::is_directory(bin), "nightly: ", bin.string(), " does not exist; build first or pass --build-dir");
  for (const auto& entry : fs::directory_iterator(bin)) {
    const std::string program = entry.path().filename().string();
    if (program.size() < 6 || program.substr(program.size() - 6) != "_bench") continue;
    const fs::path json = out / (program + ".json");
    const int rc = run_process({{entry.path().string(), "--benchmark_format=json",
                                 "--benchmark_repetitions=" + std::to_string(o.repetitions)},
                                {}, json, out / (program + ".stderr.txt")});
    if (rc != 0) {
      std::cerr << "nightly: " << program << " exited with status " << rc << "\n";
      failures = true;
      continue;
    }
    for (const auto& s : nightly::parse_google_benchmark_json(read_text(json), json.string())) {
      BenchmarkResult r;
      r.suite = program;
      r.name = s.name;
      r.revision = revision;
      r.value = s.real_time;
      r.unit = s.time_unit;
      r.recorded_at = night;  // one timestamp per night groups the repetitions
      store.add_benchmark_result(r);
      const std::string full = program + "/" + s.name;
      if (measured.empty() || measured.back() != full) measured.push_back(full);
    }
  }

  if (!o.skip_smoke) {
    const fs::path trainer = bin / "train_gpt";
    if (!fs::exists(trainer)) {
      std::cerr << "nightly: no " << trainer.string() << "; smoke run skipped\n";
    } else {
      SweepInfo sweep;
      sweep.name = "nightly-smoke-" + night;
      sweep.kind = "nightly";
      sweep.recipe = o.smoke_recipe;
      sweep.runs_planned = 1;
      const std::int64_t sweep_id = store.create_sweep(sweep);
      const fs::path log = out / "smoke.stdout.txt";
      const int rc = run_process({{trainer.string(), "--recipe", o.smoke_recipe, "--data",
                                   fs::absolute(repo / o.data).string(), "--seed", "1", "--run-id", "smoke", "--out",
                                   out.string()},
                                  repo, log, log});
      RunRecord run;
      run.sweep_id = sweep_id;
      run.seed = 1;
      run.run_id = "smoke";
      run.exit_code = rc;
      run.log_path = log.string();
      run.status = rc == 0 ? RunStatus::ok : (rc == 3 ? RunStatus::diverged : RunStatus::failed);
      if (rc != 0) run.reason = "exit status " + std::to_string(rc);
      store.add_run(run);
      std::cout << "smoke run (" << o.smoke_recipe << "): " << to_string(run.status) << "\n";
      failures = failures || rc != 0;
    }
  }

  std::vector<nightly::BenchmarkHistory> histories;
  for (const auto& name : measured) histories.push_back(history_of(store, name));
  const auto findings = nightly::detect_regressions(histories, o.regression);
  std::cout << "nightly " << night << " at " << revision.substr(0, 12) << "\n" << nightly::format_findings(findings);
  bool regression = false;
  for (const auto& f : findings) regression = regression || f.regression();
  return regression || failures ? 1 : 0;
}

}  // namespace

void register_nightly_command(CLI::App& app) {
  auto o = std::make_shared<NightlyOptions>();
  CLI::App* cmd = app.add_subcommand("nightly", "Build, benchmark, smoke-train and flag regressions");
  cmd->add_option("--build-dir", o->build_dir, "build directory (relative to the repository)")->capture_default_str();
  cmd->add_option("--repetitions", o->repetitions, "--benchmark_repetitions per program")->capture_default_str();
  cmd->add_option("--db", o->db, "results database (default $SPEEDRUN_DB or results/speedrun.db)");
  cmd->add_option("--smoke-recipe", o->smoke_recipe, "recipe of the training smoke run")->capture_default_str();
  cmd->add_option("--data", o->data, "data directory for the smoke run")->capture_default_str();
  cmd->add_option("--jobs", o->build_jobs, "build parallelism")->capture_default_str();
  cmd->add_flag("--no-build", o->skip_build, "use the existing build");
  cmd->add_flag("--no-smoke", o->skip_smoke, "skip the training smoke run");
  cmd->add_option("--alpha", o->regression.alpha, "E-divisive significance")->capture_default_str();
  cmd->add_option("--fdr", o->regression.fdr, "Benjamini-Hochberg q across benchmarks")->capture_default_str();
  cmd->add_option("--min-change", o->regression.min_relative_change, "smallest relative slowdown flagged")
      ->capture_default_str();
  cmd->add_option("--recent", o->regression.recent_nights, "nights within which a change point is new")
      ->capture_default_str();
  cmd->callback([o] {
    const int rc = run_nightly(*o);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace gpt::harness::commands
