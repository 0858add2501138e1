// `harness nightly`: builds the current revision, runs every benchmark program CTest labels `bench` (or a
// manifest lists), each isolated (a failure or a non-Google-Benchmark program is noted and the night goes
// on), runs a training smoke run on the recipe's default data, stores it all (times in nanoseconds), and
// decides with one false-discovery procedure over the night (harness/nightly/regression.h). Exit 1 only
// for a confirmed regression.
#include "harness/commands/nightly.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <spdlog/spdlog.h>

#include "harness/launcher/command.h"
#include "harness/launcher/process.h"
#include "harness/nightly/night.h"
#include "harness/nightly/regression.h"
#include "harness/nightly/tracked_night.h"
#include "harness/record/harvest.h"
#include "harness/store/store.h"
#include "base/check.h"
#include "base/file_read.h"
#include "base/utc_time.h"

namespace gpt::harness {
namespace fs = std::filesystem;
namespace {

struct NightlyOptions {
  std::string build_dir = "build", smoke_recipe = "tiny", data, manifest;
  int repetitions = 5;
  int build_jobs = 2;
  double bench_timeout_s = 900;
  double smoke_timeout_s = 1800;
  double build_timeout_s = kDefaultBuildTimeoutS;
  bool skip_build = false;
  bool skip_smoke = false;
  bool include_gpu = false;
  std::vector<std::string> ingest;
  nightly::RegressionOptions regression;
};

using nightly::Series;

struct Night {
  std::string stamp, revision;
  std::set<Series> measured;
  std::set<std::string> stamps;  // the nights stored by this command (ingest: one per new file)
  std::vector<nightly::NightFailure> failures;
  std::vector<std::string> notes;
};

// The environment row of a Google Benchmark file's context (host, commit, GPU, driver), if it names any.
std::optional<std::int64_t> environment_of(Store& store, const nightly::BenchmarkContext& context) {
  if (context.host_name.empty() && context.git_commit.empty() && context.gpu.empty()) return std::nullopt;
  Environment e;
  e.hostname = context.host_name;
  e.git_commit = context.git_commit;
  e.gpu = context.gpu;
  e.driver = context.driver;
  return store.upsert_environment(e);
}

void store_samples(Store& store, Night& night, const std::string& suite, const nightly::BenchmarkRun& run,
                   const std::string& stamp, const std::string& revision) {
  const std::optional<std::int64_t> env = environment_of(store, run.context);
  for (const auto& s : run.samples) {
    BenchmarkResult r;
    r.suite = suite;
    r.name = s.name;
    r.revision = revision;
    r.value = nightly::to_nanoseconds(s.real_time, s.time_unit, suite);
    r.unit = "ns";
    r.recorded_at = stamp;  // one stamp per night groups the repetitions
    r.environment_id = env;
    store.add_benchmark_result(r);
    night.measured.insert({suite, s.name, run.context.gpu});
    night.stamps.insert(stamp);
  }
}

void run_benchmarks(Store& store, Night& night, const NightlyOptions& o, const fs::path& build, const fs::path& out) {
  std::vector<nightly::BenchProgram> programs;
  if (!o.manifest.empty()) {
    programs = nightly::bench_programs_from_manifest(o.manifest);
  } else {
    const std::string listing = capture_stdout(
        {"ctest", "--test-dir", build.string(), "-L", "bench", "--show-only=json-v1"}, kQuickCommandTimeoutS);
    programs = nightly::bench_programs_from_ctest_json(listing, o.include_gpu);
  }
  if (programs.empty())
    night.notes.push_back("no benchmark programs found (CTest label `bench` in " + build.string() + ")");
  for (const auto& program : programs) {
    const fs::path json = out / (program.suite + ".json");
    const fs::path log = out / (program.suite + ".log");
    std::vector<std::string> argv = program.argv;
    argv.insert(argv.end(), {"--benchmark_out=" + json.string(), "--benchmark_out_format=json",
                             "--benchmark_repetitions=" + std::to_string(o.repetitions)});
    std::error_code ec;
    fs::remove(json, ec);
    try {
      // A program past --bench-timeout throws CommandTimedOut (naming it and the limit), noted below.
      const CommandResult ran = run_command({argv, o.bench_timeout_s, "--bench-timeout", {}, log, true});
      if (!ran.succeeded()) {
        night.failures.push_back({program.suite, ran.exit.describe() + "; see " + log.string()});
        continue;
      }
      if (!fs::exists(json)) {
        night.failures.push_back(
            {program.suite, "skipped: wrote no Google Benchmark JSON (not a Google Benchmark program?)"});
        continue;
      }
      const auto run = nightly::parse_google_benchmark_run(read_file(json, "benchmark JSON"), json.string());
      store_samples(store, night, program.suite, run, night.stamp, night.revision);
      spdlog::info("nightly: {}: {} measurement(s)", program.suite, run.samples.size());
    } catch (const gpt::Error& e) {
      night.failures.push_back({program.suite, user_error_message(e.what(), /*keep_source_locations=*/false)});
    }
  }
}

void run_smoke(Store& store, Night& night, const NightlyOptions& o, const fs::path& repo, const fs::path& build,
               const fs::path& out, std::int64_t sweep_id) {
  const fs::path trainer = build / "bin" / "train_gpt";
  if (!fs::exists(trainer)) {
    night.failures.push_back({"smoke", "no trainer at " + trainer.string()});
    return;
  }
  RunPlan plan;
  plan.seed = 1;
  plan.run_id = "smoke";
  plan.out_dir = out / "smoke";
  plan.log_path = plan.out_dir / "console.log";
  const std::string data = o.data.empty() ? (o.smoke_recipe == "tiny" ? "data/default" : "data/fineweb10B") : o.data;
  plan.argv = {trainer.string(),
               "--recipe",
               o.smoke_recipe,
               "--data",
               fs::absolute(repo / data).string(),
               "--seed",
               "1",
               "--run-id",
               plan.run_id,
               "--out",
               plan.out_dir.string()};
  fs::create_directories(plan.out_dir);
  Process process = Process::start(LaunchSpec{plan.argv, plan.log_path, {}, {}, true});
  const WaitResult waited = wait_with_timeout(process, o.smoke_timeout_s);
  RunRecord run =
      harvest_run(plan, waited.exit, waited.timed_out ? RunEnd::timed_out : RunEnd::exited, o.smoke_timeout_s);
  run.sweep_id = sweep_id;
  store.add_run(run, true);
  night.notes.push_back("smoke run (" + o.smoke_recipe + " on " + data + "): " + std::string(to_string(run.status)) +
                        (run.reason.empty() ? "" : " (" + run.reason + ")"));
  if (run.status != RunStatus::ok) {
    night.failures.push_back({"smoke", std::string(to_string(run.status)) + ": " + run.reason});
    return;
  }
  // Stored like a benchmark (larger is worse for both), so the same detection applies.
  auto keep = [&](const std::string& name, double value, const std::string& unit) {
    BenchmarkResult r;
    r.suite = "smoke";
    r.name = o.smoke_recipe + "/" + name;
    r.revision = night.revision;
    r.value = value;
    r.unit = unit;
    r.recorded_at = night.stamp;
    store.add_benchmark_result(r);
    night.measured.insert({r.suite, r.name, ""});
    night.stamps.insert(night.stamp);
  };
  keep("final_val_loss", *run.final_val_loss, "loss");
  if (run.train_time_ms) keep("train_time", nightly::to_nanoseconds(*run.train_time_ms, "ms"), "ns");
}

// Decides the nights this command stored (oldest first, each with the change points tracked before it), writes
// the report of the newest and exits 1 only when a change point was found: each is reported once, on its night.
int decide_and_report(Store& store, const Night& night, const NightlyOptions& o, const fs::path& report_dir) {
  std::vector<std::string> stamps(night.stamps.begin(), night.stamps.end());
  if (stamps.empty()) stamps.push_back(night.stamp);
  nightly::NightDecision decision = nightly::decide_nights(store, night.measured, stamps, o.regression);
  nightly::NightReport report;
  report.night = night.stamp;
  report.revision = night.revision.empty() ? decision.newest_commit : night.revision;
  report.failures = night.failures;
  report.notes = night.notes;
  report.histories = std::move(decision.histories);
  report.findings = std::move(decision.findings);
  report.found = decision.found;
  report.tracked = std::move(decision.tracked);
  const auto md = nightly::write_night_report(report, report_dir);
  std::cout << "nightly " << nightly::night_label(night.stamp, report.revision) << "\n"
            << nightly::format_findings(report.findings) << nightly::format_change_points(report);
  for (const auto& f : night.failures) std::cout << "failed or skipped: " << f.suite << ": " << f.reason << "\n";
  for (const auto& n : night.notes) std::cout << n << "\n";
  std::cout << "report: " << md.string() << "\n";
  return decision.found.empty() ? kExitPass : kExitFail;
}

// The files named by --ingest, in the order given; a folder stands for every *.json in it.
std::vector<fs::path> ingest_files(const std::vector<std::string>& args) {
  std::vector<fs::path> files;
  for (const auto& arg : args) {
    std::error_code ec;
    if (!fs::is_directory(arg, ec)) {
      files.emplace_back(arg);
      continue;
    }
    std::vector<fs::path> in_folder;
    for (const auto& entry : fs::directory_iterator(arg)) {
      if (entry.is_regular_file() && entry.path().extension() == ".json") in_folder.push_back(entry.path());
    }
    GPT_CHECK(!in_folder.empty(), "--ingest: folder '", arg, "' holds no *.json file");
    std::sort(in_folder.begin(), in_folder.end());
    files.insert(files.end(), in_folder.begin(), in_folder.end());
  }
  return files;
}

struct IngestNight {
  fs::path file;
  nightly::BenchmarkRun run;
  std::string stamp;  // UTC night stamp from context.date
};

// The suite of one entry: its own program (a file merging several programs names it per entry), else the
// file's program, else the file's name.
std::string suite_of(const nightly::BenchmarkSample& sample, const IngestNight& night) {
  if (!sample.executable.empty()) return fs::path(sample.executable).filename().string();
  if (!night.run.context.executable.empty()) return fs::path(night.run.context.executable).filename().string();
  return night.file.stem().string();
}

// Stores one file's night; returns how many of its benchmarks were already stored for that night. The key of a
// stored night is (suite, benchmark, night stamp): a file ingested twice, or a copy of it under another name,
// would otherwise double its samples and halve the apparent noise.
size_t store_night(Store& store, Night& all, const IngestNight& night) {
  const auto& context = night.run.context;
  std::set<std::pair<std::string, std::string>> stored_before, fresh;
  for (const auto& sample : night.run.samples) {
    std::pair key{suite_of(sample, night), sample.name};
    if (stored_before.count(key) || fresh.count(key)) continue;
    (store.has_benchmark_night(key.first, key.second, night.stamp) ? stored_before : fresh).insert(std::move(key));
  }
  if (fresh.empty()) return stored_before.size();
  const std::optional<std::int64_t> env = environment_of(store, context);
  sql::Transaction tx(store.db());
  for (const auto& sample : night.run.samples) {
    const std::string suite = suite_of(sample, night);
    if (!fresh.count({suite, sample.name})) continue;
    BenchmarkResult r;
    r.suite = suite;
    r.name = sample.name;
    r.revision = context.git_commit;
    r.value = nightly::to_nanoseconds(sample.real_time, sample.time_unit, night.file.string());
    r.unit = "ns";
    r.recorded_at = night.stamp;
    r.environment_id = env;
    store.add_benchmark_result(r);
    all.measured.insert({suite, sample.name, context.gpu});
    all.stamps.insert(night.stamp);
  }
  tx.commit();
  return stored_before.size();
}

int run_ingest(const NightlyOptions& o, GlobalOptions& global) {
  Store store = open_store(global);
  Night all;
  std::vector<IngestNight> nights;
  for (const auto& file : ingest_files(o.ingest)) {
    try {
      IngestNight night{
          file, nightly::parse_google_benchmark_run(read_file(file, "benchmark JSON"), file.string()), {}};
      GPT_CHECK(!night.run.context.date.empty(), file.string(), ": no context.date; cannot tell which night it is");
      night.stamp = nightly::utc_stamp_from_benchmark_date(night.run.context.date, file.string());
      nights.push_back(std::move(night));
    } catch (const gpt::Error& e) {
      all.failures.push_back({file.string(), user_error_message(e.what(), /*keep_source_locations=*/false)});
    }
  }
  // Oldest night first: the history is stored in the order it was measured, whatever the files are called.
  std::stable_sort(nights.begin(), nights.end(), [](const auto& a, const auto& b) { return a.stamp < b.stamp; });
  std::string newest;
  size_t skipped = 0;
  for (const auto& night : nights) {
    const std::string where = "nightly --ingest: " + night.file.string() + ": ";
    const size_t measured_before = all.measured.size();
    try {
      const size_t already = store_night(store, all, night);
      if (all.measured.size() == measured_before && already > 0) {
        ++skipped;
        spdlog::info("{}already stored (night {}), skipped", where, night.stamp);
        continue;
      }
      newest = std::max(newest, night.stamp);
      spdlog::info("{}{} measurement(s) for night {}{}{}", where, night.run.samples.size(), night.stamp,
                   night.run.context.host_name.empty() ? "" : " on " + night.run.context.host_name,
                   already ? "; " + std::to_string(already) + " benchmark(s) already stored for it were skipped" : "");
    } catch (const gpt::Error& e) {
      all.failures.push_back({night.file.string(), user_error_message(e.what(), /*keep_source_locations=*/false)});
    }
  }
  if (all.measured.empty() && all.failures.empty() && skipped > 0) {
    std::cout << "nightly --ingest: nothing new (" << skipped << " file(s) already stored)\n";
    return kExitPass;
  }
  if (all.measured.empty()) {
    // Each file's own reason, as the report would have listed it: a count alone leaves the user to guess.
    std::string reasons;
    for (const auto& failure : all.failures) {
      const bool named = failure.reason.rfind(failure.suite, 0) == 0;  // most reasons start with the file already
      reasons += "\n  " + (named ? failure.reason : failure.suite + ": " + failure.reason);
    }
    GPT_FAIL("nightly --ingest: nothing stored: ", all.failures.size(), " file(s) refused:", reasons);
  }
  all.stamp = newest;
  return decide_and_report(store, all, o, results_dir(global) / "reports" / "nightly" / ("ingest-" + newest));
}

int run_nightly(const NightlyOptions& o, GlobalOptions& global) {
  if (!o.ingest.empty()) return run_ingest(o, global);
  const fs::path repo = capture_stdout({"git", "rev-parse", "--show-toplevel"}, kQuickCommandTimeoutS);
  Night night;
  night.revision = capture_stdout({"git", "rev-parse", "HEAD"}, kQuickCommandTimeoutS, repo);
  night.stamp = utc_iso8601_now();
  const fs::path build = fs::absolute(repo / o.build_dir);
  const fs::path out = results_dir(global) / "runs" / "nightly" / night.stamp;
  fs::create_directories(out);
  if (!o.skip_build) {
    // Configure (once) and build, both into one log; each step within --build-timeout.
    const fs::path log = out / "build.log";
    std::vector<std::vector<std::string>> steps;
    if (!fs::exists(build / "CMakeCache.txt")) {
      steps.push_back({"cmake", "-S", repo.string(), "-B", build.string(), "-DCMAKE_BUILD_TYPE=Release"});
    }
    steps.push_back({"cmake", "--build", build.string(), "-j", std::to_string(o.build_jobs)});
    for (const auto& step : steps) {
      const CommandResult built = run_command({step, o.build_timeout_s, "--build-timeout", {}, log, false});
      GPT_CHECK(built.succeeded(), "nightly: build failed ('", join_command(step), "' ended with ",
                built.exit.describe(), "); see ", log.string());
    }
  }
  Store store = open_store(global);
  SweepInfo sweep;
  sweep.name = "nightly-" + night.stamp;
  sweep.kind = "nightly";
  sweep.recipe = o.skip_smoke ? "" : o.smoke_recipe;
  sweep.runs_planned = o.skip_smoke ? 0 : 1;
  store.create_sweep_unique(sweep);
  run_benchmarks(store, night, o, build, out);
  if (!o.skip_smoke) run_smoke(store, night, o, repo, build, out, sweep.id);
  for (const auto& f : night.failures) store.set_param(OwnerKind::sweep, sweep.id, "failed:" + f.suite, f.reason);
  return decide_and_report(store, night, o, results_dir(global) / "reports" / "nightly" / night.stamp);
}

}  // namespace

void add_nightly_command(CLI::App& app, GlobalOptions& global) {
  auto o = std::make_shared<NightlyOptions>();
  CLI::App* cmd = app.add_subcommand("nightly", "benchmark, smoke-train and flag confirmed regressions");
  cmd->add_option("--build-dir", o->build_dir, "build directory (relative to the repository)")->capture_default_str();
  cmd->add_option("--manifest", o->manifest, "file listing the benchmark programs (default: CTest label `bench`)");
  cmd->add_flag("--gpu", o->include_gpu, "also run the benchmarks labelled `gpu`");
  cmd->add_option("--repetitions", o->repetitions, "--benchmark_repetitions per program")
      ->capture_default_str()
      ->check(whole_in(1, 100000));
  cmd->add_option("--bench-timeout", o->bench_timeout_s,
                  "seconds per benchmark program before its process group is "
                  "killed")
      ->capture_default_str()
      ->check(finite_in(1e-3, kMaxTimeoutS));
  cmd->add_option("--smoke-recipe", o->smoke_recipe, "recipe of the training smoke run")->capture_default_str();
  cmd->add_option("--data", o->data, "data folder of the smoke run (default: the recipe's, data/default for tiny)");
  cmd->add_option("--smoke-timeout", o->smoke_timeout_s, "seconds for the smoke run")
      ->capture_default_str()
      ->check(finite_in(1e-3, kMaxTimeoutS));
  cmd->add_option("--jobs", o->build_jobs, "build parallelism")->capture_default_str();
  cmd->add_option("--build-timeout", o->build_timeout_s,
                  "seconds for each build step (configure, build) before "
                  "its process group is killed")
      ->capture_default_str()
      ->check(finite_in(1e-3, kMaxTimeoutS));
  cmd->add_flag("--no-build", o->skip_build, "use the existing build");
  cmd->add_flag("--no-smoke", o->skip_smoke, "skip the training smoke run");
  cmd->add_option("--ingest", o->ingest,
                  "store these Google Benchmark JSON files or folders of them (one night each, "
                  "dated by their context; a night already stored is skipped) instead of "
                  "running anything, then decide and report");
  cmd->add_option("--fdr", o->regression.fdr, "Benjamini-Hochberg q over every test of the night")
      ->capture_default_str();
  cmd->add_option("--min-change", o->regression.min_relative_change, "floor of the minimum relative slowdown")
      ->capture_default_str();
  cmd->add_option("--noise-factor", o->regression.noise_factor,
                  "minimum effect >= this x the benchmark's night-to-night variation")
      ->capture_default_str();
  cmd->add_option("--window", o->regression.window, "nights of history used")->capture_default_str();
  cmd->callback([o, &global] {
    const int rc = run_nightly(*o, global);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace gpt::harness
