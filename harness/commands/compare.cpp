// `harness compare --baseline REV|NAME --candidate REV [--runs N] [--recipe R] [-- CMD...]`:
// builds each revision in its own cached worktree, runs the arms interleaved (ABAB…) so drift hits
// both alike, stores both arms in one sweep and prints the comparison verdict.
#include "harness/commands/compare.h"

#include <chrono>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "harness/commands/subprocess.h"
#include "harness/compare/comparison.h"
#include "harness/logparse/logparse.h"
#include "harness/logparse/run_summary.h"
#include "harness/store/store.h"
#include "kernels/check.h"

namespace gpt::harness::commands {
namespace fs = std::filesystem;
namespace {

struct CompareOptions {
  std::string baseline, candidate, recipe, data = "data", db, cache_dir = ".cache/compare";
  std::string baselines_dir = "baselines", out_dir = "results/runs";
  int runs = 10;
  std::int64_t first_seed = 1;
  int build_jobs = 2;
  compare::ComparisonSettings settings;
  std::vector<std::string> command;  // after `--`: {bin} {seed} {run_id} {out} {recipe} are substituted
};

std::string utc_stamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

// Checks out `revision` into <cache>/<sha> (once) and builds train_gpt there; returns the worktree.
fs::path build_revision(const std::string& revision, const CompareOptions& o, const fs::path& repo) {
  const std::string sha = capture_output({"git", "rev-parse", "--verify", revision + "^{commit}"}, repo);
  const fs::path tree = fs::absolute(repo / o.cache_dir / sha);
  if (!fs::exists(tree / ".git")) {
    fs::create_directories(tree.parent_path());
    capture_output({"git", "worktree", "add", "--detach", tree.string(), sha}, repo);
  }
  const fs::path build = tree / "build";
  std::cout << "building " << revision << " (" << sha.substr(0, 12) << ") in " << build.string() << "\n";
  const fs::path log = tree / "harness-build.log";
  int rc = run_process({{"cmake", "-S", tree.string(), "-B", build.string(), "-DCMAKE_BUILD_TYPE=Release"}, {}, log, log});
  if (rc == 0) {
    rc = run_process({{"cmake", "--build", build.string(), "-j", std::to_string(o.build_jobs), "--target", "train_gpt"},
                      {}, log, log});
  }
  GPT_CHECK(rc == 0, "compare: building ", revision, " failed (status ", rc, "); see ", log.string());
  return tree;
}

std::string substitute(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size())) {
      text.replace(at, key.size(), value);
    }
  }
  return text;
}

// One run of one arm; the result is read from OUT/ID.json when the trainer wrote it, else from the
// speedrun log lines it printed.
RunRecord run_arm(compare::Arm arm, const fs::path& tree, const fs::path& binary, std::int64_t seed,
                  const CompareOptions& o, const fs::path& out) {
  const std::string run_id = std::string(compare::to_string(arm)) + "-seed" + std::to_string(seed);
  fs::create_directories(out);
  const std::map<std::string, std::string> values{{"{bin}", binary.string()}, {"{seed}", std::to_string(seed)},
                                                  {"{run_id}", run_id}, {"{out}", out.string()},
                                                  {"{recipe}", o.recipe}};
  std::vector<std::string> argv;
  if (o.command.empty()) {
    argv = {binary.string(), "--recipe", o.recipe, "--data", fs::absolute(o.data).string(), "--seed",
            std::to_string(seed), "--run-id", run_id, "--out", out.string()};
  } else {
    for (const auto& a : o.command) argv.push_back(substitute(a, values));
  }
  const fs::path log = out / (run_id + ".stdout.txt");
  const auto start = std::chrono::steady_clock::now();
  const int rc = run_process({argv, tree, log, log});
  RunRecord run;
  run.arm = std::string(compare::to_string(arm));
  run.seed = seed;
  run.run_id = run_id;
  run.exit_code = rc;
  run.log_path = log.string();
  run.wall_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const fs::path summary_path = out / (run_id + ".json");
  if (fs::exists(summary_path)) {
    const RunSummary s = read_run_summary(summary_path);
    run.final_val_loss = s.final_val_loss;
    run.train_time_ms = s.train_time_ms;
    run.steps = s.steps;
    run.total_steps = s.total_steps;
    run.tokens = s.tokens;
    run.peak_memory_mib = s.peak_memory_mib;
    for (const auto& p : s.val_history) run.val_points.push_back({p.step, p.val_loss, p.train_time_ms});
  } else {
    const std::vector<ParsedLog> logs = parse_log_file(log);
    const ParsedLog& l = logs.back();
    run.final_val_loss = l.final_val_loss;
    run.train_time_ms = l.final_train_time_ms;
    run.steps = l.final_step;
    run.total_steps = l.total_steps;
    run.peak_memory_mib = l.peak_memory_mib;
    run.reason = l.reason;
    for (const auto& p : l.val_points) run.val_points.push_back({p.step, p.val_loss, p.train_time_ms});
  }
  const bool finished = rc == 0 && run.train_time_ms.has_value();
  run.status = finished ? RunStatus::ok : (rc == 3 ? RunStatus::diverged : RunStatus::failed);
  if (!finished && run.reason.empty()) run.reason = "exit status " + std::to_string(rc) + " or no train_time";
  return run;
}

int run_compare(CompareOptions o) {
  GPT_CHECK(o.runs >= 2, "--runs must be >= 2 (Welch needs two runs per arm), got ", o.runs);
  const fs::path repo = capture_output({"git", "rev-parse", "--show-toplevel"});
  const std::optional<compare::Baseline> named = compare::find_baseline(repo / o.baselines_dir, o.baseline);
  if (o.recipe.empty()) o.recipe = named ? named->recipe : "tiny";

  std::map<compare::Arm, std::pair<fs::path, fs::path>> arms;  // worktree, trainer binary
  if (named && !named->binary.empty()) {
    arms[compare::Arm::baseline] = {repo, fs::absolute(named->binary)};
  } else {
    const fs::path tree = build_revision(named ? named->revision : o.baseline, o, repo);
    arms[compare::Arm::baseline] = {tree, tree / "build" / "bin" / "train_gpt"};
  }
  const fs::path cand_tree = build_revision(o.candidate, o, repo);
  arms[compare::Arm::candidate] = {cand_tree, cand_tree / "build" / "bin" / "train_gpt"};

  Store store = Store::open(resolve_db_path(o.db));
  SweepInfo sweep;
  sweep.name = "compare-" + o.recipe + "-" + utc_stamp();
  sweep.kind = "compare";
  sweep.recipe = o.recipe;
  sweep.command = nlohmann::json(o.command).dump();
  sweep.target = o.settings.target_loss;
  sweep.alpha = o.settings.alpha;
  sweep.runs_planned = 2 * o.runs;
  const std::int64_t sweep_id = store.create_sweep(sweep);
  store.set_param(OwnerKind::sweep, sweep_id, "baseline", o.baseline);
  store.set_param(OwnerKind::sweep, sweep_id, "candidate", o.candidate);

  std::map<compare::Arm, compare::ArmResults> results;
  std::map<compare::Arm, std::int64_t> next_seed{{compare::Arm::baseline, o.first_seed},
                                                 {compare::Arm::candidate, o.first_seed}};
  const fs::path out = fs::absolute(repo / o.out_dir / sweep.name);
  for (const compare::Arm arm : compare::interleaved_order(static_cast<size_t>(o.runs))) {
    const auto& [tree, binary] = arms[arm];
    RunRecord run = run_arm(arm, tree, binary, next_seed[arm]++, o, out / std::string(compare::to_string(arm)));
    run.sweep_id = sweep_id;
    store.add_run(run);
    std::cout << compare::to_string(arm) << " seed " << *run.seed << ": " << to_string(run.status);
    if (run.train_time_ms) std::cout << "  time " << *run.train_time_ms / 1000.0 << " s";
    if (run.final_val_loss) std::cout << "  loss " << *run.final_val_loss;
    std::cout << std::endl;
    if (run.status != RunStatus::ok) continue;
    results[arm].train_time_s.push_back(*run.train_time_ms / 1000.0);
    if (run.final_val_loss) results[arm].final_val_loss.push_back(*run.final_val_loss);
  }
  const compare::ComparisonReport report =
      compare::analyze_comparison(results[compare::Arm::candidate], results[compare::Arm::baseline], o.settings);
  store.set_metric(OwnerKind::sweep, sweep_id, "time_ratio", report.time_ratio);
  store.set_metric(OwnerKind::sweep, sweep_id, "time_welch_p", report.time_welch.p_value);
  store.set_metric(OwnerKind::sweep, sweep_id, "time_mann_whitney_p", report.time_mann_whitney.p_value);
  std::cout << "\nsweep " << sweep.name << " (" << o.candidate << " vs " << o.baseline << ")\n"
            << compare::format_comparison(report, o.settings, named ? named->published : std::nullopt);
  return 0;
}

}  // namespace

void register_compare_command(CLI::App& app) {
  auto options = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand("compare", "Compare a candidate revision against a baseline (interleaved runs)");
  cmd->add_option("--baseline", options->baseline, "git revision or name of baselines/<NAME>.toml")->required();
  cmd->add_option("--candidate", options->candidate, "git revision of the candidate")->required();
  cmd->add_option("--runs", options->runs, "runs per arm")->capture_default_str();
  cmd->add_option("--recipe", options->recipe, "recipe (default: the baseline's, else tiny)");
  cmd->add_option("--data", options->data, "data directory passed to the trainer")->capture_default_str();
  cmd->add_option("--db", options->db, "results database (default $SPEEDRUN_DB or results/speedrun.db)");
  cmd->add_option("--cache", options->cache_dir, "worktree cache, relative to the repository")->capture_default_str();
  cmd->add_option("--seed", options->first_seed, "first seed of each arm")->capture_default_str();
  cmd->add_option("--alpha", options->settings.alpha, "significance level")->capture_default_str();
  cmd->add_option("--target", options->settings.target_loss, "record target loss")->capture_default_str();
  cmd->add_option("--jobs", options->build_jobs, "build parallelism")->capture_default_str();
  cmd->add_option("command", options->command,
                  "after --: trainer command run in each arm's worktree; {bin} {seed} {run_id} {out} {recipe} "
                  "are substituted");
  cmd->callback([options] {
    const int rc = run_compare(*options);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace gpt::harness::commands
