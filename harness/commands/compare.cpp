// `harness compare --baseline REV|NAME --candidate REV [--runs N] [--recipe R] [--ARM-recipe R] [-- CMD...]`: builds
// each arm (a revision in its own cached worktree through the project's CMake presets, or an existing build), runs the
// arms interleaved (ABAB…, same seeds, so drift hits both alike and the runs pair up) through record's sweep
// machinery (launcher, parallel slots, timeout, spool, resume), stores both arms in one sweep and reports.
#include "harness/commands/compare.h"

#include <algorithm>
#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include <spdlog/spdlog.h>

#include "harness/commands/common.h"
#include "harness/commands/compare_build.h"
#include "harness/commands/recipe_target.h"
#include "harness/commands/sweep_lifecycle.h"
#include "harness/compare/comparison.h"
#include "harness/launcher/safe_names.h"
#include "harness/compare/revision_check.h"
#include "harness/record/environment_probe.h"
#include "harness/report/comparison_report.h"
#include "base/check.h"
#include "base/log.h"
#include "base/utc_time.h"

namespace gpt::harness {
namespace fs = std::filesystem;
namespace {

constexpr const char* kArms[] = {"baseline", "candidate"};

struct CompareOptions {
  std::string baseline, candidate, recipe, data, name, resume;
  int runs = 0;
  std::int64_t first_seed = 0;
  int gpus = 0;
  std::optional<double> target;
  double alpha = 0.01;
  std::vector<std::string> fail_if_slower;  // --fail-if-slower [PCT]
  const CLI::Option* fail_if_slower_option = nullptr;
  double timeout_s = 0;
  int parallel = 1;
  std::string backend;
  std::vector<std::string> sets;
  std::vector<std::string> baseline_sets, candidate_sets;  // --baseline-set / --candidate-set: one arm's overrides
  std::string baseline_recipe, candidate_recipe;           // --baseline-recipe / --candidate-recipe (default: --recipe)
  BuildSettings build;
  std::vector<std::string> build_dirs;  // ARM=DIR
  std::string baselines_dir = "baselines";
  bool quiet = false;
  std::vector<std::string> command;  // after `--`: {bin} {seed} {run_id} {out} {data} {recipe} {gpus}
  LauncherSettings launcher;
  bool launcher_given = false;
  std::vector<std::string> given;  // the options on the command line (their first long names)
};

// With --resume, what may still change: how the remaining runs run and the slowdown check. Everything else is the
// stored comparison's; an option that cannot apply is refused rather than silently ignored.
bool applies_on_resume(const std::string& option) {
  static const std::set<std::string> run_options = {"--resume",   "--runs",       "--parallel",
                                                    "--timeout",  "--quiet",      "--fail-if-slower",
                                                    "--launcher", "--sbatch-arg", "--srun-arg"};
  return run_options.count(option) != 0 || option.rfind("--slurm-", 0) == 0;
}

std::optional<double> fail_if_slower_pct(const CompareOptions& o) {
  if (o.fail_if_slower_option == nullptr || o.fail_if_slower_option->count() == 0) return std::nullopt;
  if (o.fail_if_slower.empty() || o.fail_if_slower.front().empty()) return 0.0;
  try {
    size_t used = 0;
    const double pct = std::stod(o.fail_if_slower.front(), &used);
    GPT_CHECK(used == o.fail_if_slower.front().size() && pct >= 0 && pct < 1000, "");
    return pct;
  } catch (const std::exception&) {
    GPT_FAIL("--fail-if-slower: expected an allowed slowdown in percent (a number >= 0, e.g. 2), got '",
             o.fail_if_slower.front(), "'");
  }
}

// --build-dir ARM=DIR: the trainer of that arm is DIR/bin/train_gpt (no checkout, no build).
std::map<std::string, fs::path> parse_build_dirs(const std::vector<std::string>& values) {
  std::map<std::string, fs::path> dirs;
  for (const auto& v : values) {
    const auto eq = v.find('=');
    const std::string arm = eq == std::string::npos ? "" : v.substr(0, eq);
    GPT_CHECK(arm == "baseline" || arm == "candidate", "--build-dir: expected baseline=DIR or candidate=DIR, got '", v,
              "'");
    GPT_CHECK(eq + 1 < v.size(), "--build-dir ", arm, "=: the folder is empty");
    GPT_CHECK(dirs.emplace(arm, fs::absolute(v.substr(eq + 1))).second, "--build-dir: ", arm, " given twice");
  }
  return dirs;
}

// Each arm's trainer: an existing build, a named baseline's prebuilt binary, or a build of the revision.
struct ArmTrainer {
  std::string revision;  // what the user named
  std::string sha;       // when built from git
  fs::path binary;
};

ArmTrainer resolve_arm(const std::string& arm, const std::string& revision, const std::map<std::string, fs::path>& dirs,
                       const BuildSettings& build, const std::optional<compare::Baseline>& named, bool check_binary) {
  ArmTrainer t;
  t.revision = revision;
  if (const auto it = dirs.find(arm); it != dirs.end()) {
    t.binary = it->second / "bin" / "train_gpt";
  } else if (arm == "baseline" && named && !named->binary.empty()) {
    t.binary = fs::absolute(named->binary);
  } else {
    const BuiltRevision built = build_revision(named && arm == "baseline" ? named->revision : revision, build);
    t.sha = built.sha;
    t.binary = built.binary;
  }
  GPT_CHECK(!check_binary || fs::exists(t.binary), "compare: the ", arm, " trainer '", t.binary.string(),
            "' does not exist (build it, or name its build folder with --build-dir ", arm, "=DIR)");
  return t;
}

// The user's CMD, or each arm's train_gpt ({bin}) with the contract's flags.
std::vector<std::string> command_template(const CompareOptions& o) {
  if (!o.command.empty()) return o.command;
  return trainer_command_template("{bin}", o.gpus, o.backend, o.sets);
}

// Figures the reports read back as JSON numbers (not SweepParams::set_number's fixed decimals).
void set_optional_number(SweepParams& params, const char* key, const std::optional<double>& value) {
  if (value) params.set_text(key, nlohmann::json(*value).dump());
}

// A new sweep: resolves the arms (building them), the target and the named baseline, and stores the settings
// that --resume and `harness report` need.
SweepInfo create_sweep(Store& store, CompareOptions& o) {
  GPT_CHECK(o.runs >= 2, "--runs: give the runs per arm (>= 2: each arm's tests need two), or --resume SWEEP");
  check_seed_range(o.first_seed, o.runs);
  (void)fail_if_slower_pct(o);  // a bad percentage is refused before anything is resolved or built
  GPT_CHECK(!o.baseline.empty() && !o.candidate.empty(),
            "compare: --baseline and --candidate are required for a new "
            "comparison (or --resume SWEEP)");
  GPT_CHECK(
      (o.backend.empty() && o.sets.empty() && o.baseline_sets.empty() && o.candidate_sets.empty()) || o.command.empty(),
      "--backend/--set/--baseline-set/--candidate-set: they go to train_gpt; a command after -- keeps its own "
      "command line");
  const std::optional<compare::Baseline> named = compare::find_baseline(o.baselines_dir, o.baseline);
  if (o.recipe.empty()) o.recipe = named ? named->recipe : "tiny";
  // A baseline recorded before its recipe was renamed: its own trainer knows the recipe by the old name only.
  if (named && !named->baseline_recipe.empty() && o.baseline_recipe.empty() && o.recipe == named->recipe) {
    o.baseline_recipe = named->baseline_recipe;
  }
  if (o.data.empty()) o.data = default_data_dir(o.recipe);
  const auto dirs = parse_build_dirs(o.build_dirs);
  std::map<std::string, ArmTrainer> trainers;
  trainers["baseline"] = resolve_arm("baseline", o.baseline, dirs, o.build, named, o.command.empty());
  trainers["candidate"] = resolve_arm("candidate", o.candidate, dirs, o.build, std::nullopt, o.command.empty());

  if (o.command.empty()) check_data_folder(command_template(o), o.data, o.launcher);

  // Each arm's trainer is asked about its recipe and overrides before the first run: an unknown recipe or key fails
  // here (exit 2) rather than as a sweep of failed runs. The candidate's answer also says what a record is.
  std::optional<RecipeTarget> candidate_target;
  std::string candidate_target_note;
  for (const char* arm : kArms) {
    const bool candidate = std::string(arm) == "candidate";
    std::vector<std::string> sets = o.sets;
    const auto& arm_sets = candidate ? o.candidate_sets : o.baseline_sets;
    sets.insert(sets.end(), arm_sets.begin(), arm_sets.end());
    const std::string& arm_recipe = candidate ? o.candidate_recipe : o.baseline_recipe;
    const std::string recipe = arm_recipe.empty() ? o.recipe : arm_recipe;
    // A command after -- carries its own flags: its trainer is asked only for the candidate's record target.
    const bool reads_target = candidate && !o.target;
    if (!o.command.empty() && !reads_target) continue;
    const RecipeCheck check = check_recipe(trainers[arm].binary, recipe, sets);
    if (check.verdict == RecipeCheck::Verdict::refused && o.command.empty()) {
      std::string given = "--recipe " + recipe;
      for (const auto& set : sets) given += " --set " + set;
      GPT_FAIL("compare: the ", arm, " arm's trainer '", trainers[arm].binary.string(), "' refuses `", given,
               "`: ", check.message, "; nothing was run");
    }
    if (candidate) {
      candidate_target = check.target;
      candidate_target_note = "recipe " + recipe + " [record]: ";
      if (!check.target) candidate_target_note = check.message;
    }
  }
  std::string target_source = "--target";
  if (!o.target) {
    if (candidate_target) {
      o.target = candidate_target->target;
      target_source = candidate_target_note + candidate_target->source;
    } else {
      // A trainer that cannot tell leaves the record check out.
      if (!o.quiet) spdlog::info("no record check: {} (pass --target LOSS for one)", candidate_target_note);
      target_source.clear();
    }
  }

  SweepInfo sweep;
  sweep.name = o.name.empty() ? to_path_name("compare-" + o.recipe + "-" + utc_compact_now()) : o.name;
  sweep.kind = "compare";
  sweep.recipe = o.recipe;
  sweep.command = nlohmann::json(command_template(o)).dump();
  sweep.target = o.target;
  sweep.alpha = o.alpha;
  sweep.runs_planned = 2 * o.runs;
  sweep.gpus = o.gpus;
  sweep.environment_id = store.upsert_environment(probe_environment());
  store.create_sweep_unique(sweep, /*name_given=*/!o.name.empty());
  sweep = *store.find_sweep(std::to_string(sweep.id));
  SweepParams params(store, sweep);
  const auto set = [&](const std::string& key, const std::string& value) { params.set_text(key, value); };
  set("baseline", o.baseline);
  set("candidate", o.candidate);
  for (const char* arm : kArms) {
    set(std::string(arm) + "_bin", trainers[arm].binary.string());
    if (!trainers[arm].sha.empty()) set(std::string(arm) + "_sha", trainers[arm].sha);
  }
  for (const auto& [arm, dir] : dirs) set(arm + "_build_dir", dir.string());
  for (const char* arm : kArms) {
    // The commit the arm's name stands for, checked after the runs against the commit its trainer reports.
    const std::string commit = trainers[arm].sha.empty() ? resolve_revision(trainers[arm].revision) : trainers[arm].sha;
    if (!commit.empty()) set(std::string(arm) + "_commit", commit);
    if (trainers[arm].sha.empty()) {
      set(std::string(arm) + "_trainer_dir", trainers[arm].binary.parent_path().parent_path().string());
    }
  }
  if (!o.baseline_recipe.empty()) set("baseline_recipe", o.baseline_recipe);
  if (!o.candidate_recipe.empty()) set("candidate_recipe", o.candidate_recipe);
  if (!o.baseline_sets.empty()) set("baseline_sets", nlohmann::json(o.baseline_sets).dump());
  if (!o.candidate_sets.empty()) set("candidate_sets", nlohmann::json(o.candidate_sets).dump());
  SweepRunSettings{o.first_seed, o.data, o.timeout_s}.save(params);
  set("preset", o.build.preset);
  if (!o.build.cmake_args.empty()) set("cmake_args", nlohmann::json(o.build.cmake_args).dump());
  if (!target_source.empty()) set("target_source", target_source);
  set_optional_number(params, "fail_if_slower_pct", fail_if_slower_pct(o));
  if (named && named->published) {
    set_optional_number(params, "published_mean_val_loss", named->published->mean_val_loss);
    set_optional_number(params, "published_runs", named->published->runs);
    set_optional_number(params, "published_mean_train_time_s", named->published->mean_train_time_s);
  }
  save_launcher_settings(store, sweep.id, o.launcher);
  return sweep;
}

// --resume SWEEP [--runs N]: the sweep's stored settings; --runs can only extend it.
SweepInfo resume_sweep(Store& store, CompareOptions& o, const fs::path& db) {
  SweepInfo sweep = find_sweep_to_resume(store, o.resume, "compare", db);
  SweepParams params(store, sweep);
  const SweepRunSettings stored = SweepRunSettings::load(params);  // read whole before anything is changed
  extend_planned_runs(store, sweep, o.runs, std::size(kArms));
  o.runs = static_cast<int>(sweep.runs_planned / 2);
  o.first_seed = stored.first_seed;
  o.recipe = sweep.recipe;
  o.data = stored.data;
  o.gpus = sweep.gpus;
  const bool timeout_given = std::count(o.given.begin(), o.given.end(), "--timeout") != 0;
  if (timeout_given) {  // the remaining runs get the new limit, and so does a later --resume
    params.set_number("timeout_s", o.timeout_s);
  } else {
    o.timeout_s = stored.timeout_s;
  }
  o.baseline = params.text("baseline");
  o.candidate = params.text("candidate");
  o.launcher = load_launcher_settings(store, sweep.id, o.launcher, o.launcher_given);
  if (const auto pct = fail_if_slower_pct(o)) {  // a check asked for now applies to the resumed comparison
    set_optional_number(params, "fail_if_slower_pct", pct);
    spdlog::info("sweep \"{}\": --fail-if-slower {} applies from now on", sweep.name, *pct);
  }
  return sweep;
}

// Each arm's named revision against the commits its runs' trainers reported; the sentences are stored with the
// sweep (the reports show them) and printed. Returns true when a trainer built from a revision reports another.
bool check_revisions(Store& store, const SweepInfo& sweep) {
  const auto params = store.params(OwnerKind::sweep, sweep.id);
  const auto param = [&](const std::string& key) { return params.count(key) ? params.at(key) : std::string(); };
  std::map<std::string, std::set<std::string>> reported;
  for (const auto& run : store.runs(sweep.id)) {
    const auto run_params = store.params(OwnerKind::run, run.id);
    if (const auto it = run_params.find("trainer_commit"); it != run_params.end()) reported[run.arm].insert(it->second);
  }
  bool mismatch = false;
  for (const char* arm : kArms) {
    const std::string a(arm);
    const compare::RevisionCheck check =
        compare::check_arm_revision({a, param(a), param(a + "_commit"), param(a + "_trainer_dir"), reported[a]});
    store.set_param(OwnerKind::sweep, sweep.id, a + "_revision_check", check.sentence);
    std::cout << (check.mismatch ? "MISMATCH: " : "") << check.sentence << "\n";
    mismatch = mismatch || check.mismatch;
  }
  return mismatch;
}

int run_compare(CompareOptions o, GlobalOptions& global) {
  if (!o.resume.empty()) {
    refuse_options_on_resume(o.given, applies_on_resume,
                             "the sweep keeps its arms, trainers, command line and statistics settings",
                             "give only --resume SWEEP [--runs N], --fail-if-slower [PCT] and run options (--parallel, "
                             "--timeout, --quiet, launcher options), or start a new comparison");
  }
  Store store = open_store(global);  // also stores runs an earlier harness left spooled
  const SweepInfo sweep =
      o.resume.empty() ? create_sweep(store, o) : resume_sweep(store, o, resolve_db_path(global.db));
  const SweepParams params(store, sweep);
  const auto argv_template = nlohmann::json::parse(sweep.command).get<std::vector<std::string>>();
  const bool default_command = !argv_template.empty() && argv_template.front() == "{bin}";

  std::vector<PlannedArm> arms;
  for (const char* name : kArms) {
    PlannedArm arm;
    arm.name = name;
    const std::string recipe = compare_arm_recipe(sweep, params.all(), name);  // stored: --resume runs the same
    arm.params["arm_recipe"] = recipe;
    arm.values = {{"bin", params.text(arm.name + "_bin")},
                  {"recipe", recipe},
                  {"data", fs::absolute(o.data).string()},
                  {"gpus", std::to_string(std::max(o.gpus, 1))}};
    if (default_command && params.has(arm.name + "_sets")) {
      for (const auto& s : nlohmann::json::parse(params.text(arm.name + "_sets")).get<std::vector<std::string>>()) {
        arm.extra_args.insert(arm.extra_args.end(), {"--set", s});
      }
    }
    arms.push_back(std::move(arm));
  }
  const auto run_root = sweep_runs_dir(global, sweep.name);
  const SweepHold hold = SweepHold::take(run_root, sweep.name);  // before planning: one harness per sweep
  // Made (and checked: no symbolic link below the database's folder) before the runs, not after all of them.
  const auto reports_dir = sweep_reports_dir(global, sweep.name);
  const std::vector<RunPlan> plans =
      plan_missing_runs(store, sweep, argv_template, arms, o.first_seed, o.runs, run_root);
  for (const RunPlan& plan : plans) {  // an arm with runs still to go needs its trainer
    const fs::path binary = params.text(plan.arm + "_bin");
    GPT_CHECK(!default_command || fs::exists(binary), "compare: the ", plan.arm, " trainer '", binary.string(),
              "' of sweep '", sweep.name, "' is gone; rebuild it there (or start a new comparison)");
  }
  const SweepCall call = run_sweep_plans(
      store, sweep, plans, SweepExecution{o.parallel, o.timeout_s, o.gpus, o.quiet, o.launcher}, run_root, "compare");

  const bool revision_mismatch = check_revisions(store, sweep);
  const compare::ComparisonSettings settings = stored_comparison_settings(store, sweep);
  std::cout << "\nsweep " << sweep.name << " (" << params.text("candidate") << " vs " << params.text("baseline")
            << ")\n";
  int code = kExitPass;
  try {
    const ComparisonPage page = comparison_page_from_store(store, sweep, settings);
    const auto files = write_comparison_reports(store, sweep, page, reports_dir);
    store.set_metric(OwnerKind::sweep, sweep.id, "time_ratio", page.report.time_ratio);
    store.set_metric(OwnerKind::sweep, sweep.id, "time_p", page.report.time.t.p_value);
    std::cout << "what ran: " << arm_recipes_sentence(page) << "\n"
              << compare::format_comparison(page.report, settings) << "report: " << files.html.string()
              << "\nmarkdown: " << files.markdown.string() << "\n";
    if (page.report.too_slow) code = kExitFail;
  } catch (const gpt::Error& e) {
    // Too few finished runs for the tests: the runs are stored and listed by `harness query runs`.
    std::cout << "no comparison: " << user_error_message(e.what(), gpt::log::enabled(spdlog::level::debug)) << "\n";
    code = kExitFail;
  }
  if (revision_mismatch) {
    std::cerr << "harness: error: compare: an arm's trainer is not the revision it is named after (see above); "
                 "the comparison does not compare what its names say\n";
    return kExitUsage;
  }
  return sweep_exit_code(call, sweep, code);
}

}  // namespace

void add_compare_command(CLI::App& app, GlobalOptions& global) {
  auto o = std::make_shared<CompareOptions>();
  CLI::App* cmd = app.add_subcommand("compare",
                                     "compare a candidate revision against a baseline (interleaved, "
                                     "same-seed runs; paired tests)");
  cmd->add_option("--baseline", o->baseline, "git revision, or the name of baselines/<NAME>.toml");
  cmd->add_option("--candidate", o->candidate, "git revision of the candidate");
  cmd->add_option("--runs", o->runs, "runs per arm (with --resume: extend the sweep to this many)")
      ->check(whole_in(1, kMaxRuns));
  cmd->add_option("--recipe", o->recipe, "recipe (default: the named baseline's, else tiny)");
  cmd->add_option("--baseline-recipe", o->baseline_recipe, "recipe of the baseline's runs only (default: --recipe)");
  cmd->add_option("--candidate-recipe", o->candidate_recipe,
                  "recipe of the candidate's runs only (default: --recipe; its [record] target is the default "
                  "--target)");
  cmd->add_option("--data", o->data, "data folder (default: the recipe's corpus, data/default for tiny)");
  cmd->add_option("--first-seed,--seed", o->first_seed, "seed of each arm's first run; run i uses first-seed + i")
      ->check(whole_in(0, std::numeric_limits<std::int64_t>::max()));
  cmd->add_option("--gpus", o->gpus, "GPUs per run (passed as --gpus)")->check(whole_in(1, 4096));
  cmd->add_option("--alpha", o->alpha, "significance level of every test (default 0.01)")
      ->check(finite_in(1e-12, 0.999999));
  cmd->add_option("--target", o->target,
                  "record target of the candidate's losses (default: the recipe's [record] target)")
      ->check(finite_in(0, kMaxTargetLoss));
  o->fail_if_slower_option =
      cmd->add_option("--fail-if-slower", o->fail_if_slower,
                      "exit 1 when the candidate's train time is above (100 + PCT)% of the baseline's with "
                      "significance (one-sided test at --alpha; PCT defaults to 0)")
          ->expected(0, 1)
          ->allow_extra_args(false);
  cmd->add_option("--timeout", o->timeout_s, "seconds per run before its process group is killed")
      ->check(finite_in(0, kMaxTimeoutS));
  cmd->add_option("--parallel", o->parallel, "runs at once (CUDA_VISIBLE_DEVICES partitions)")
      ->check(whole_in(1, 4096));
  cmd->add_option("--backend", o->backend, "trainer backend, passed as --backend")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  cmd->add_option("--set", o->sets, "recipe override KEY=VALUE passed to every run of both arms (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--baseline-set", o->baseline_sets,
                  "recipe override KEY=VALUE for the baseline's runs only, after "
                  "--set (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--candidate-set", o->candidate_sets,
                  "recipe override KEY=VALUE for the candidate's runs only, "
                  "after --set (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--preset", o->build.preset, "CMake configure preset the arms are built with (default cpu)");
  cmd->add_option("--cmake-arg", o->build.cmake_args,
                  "extra CMake configure argument for both arms, e.g. "
                  "--cmake-arg=-DSPEEDRUN_ENABLE_CUDA=ON (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--build-dir", o->build_dirs,
                  "reuse an existing build: baseline=DIR or candidate=DIR (DIR/bin/train_gpt; repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--cache", o->build.cache_dir, "worktree cache, relative to the repository (default .cache/compare)");
  cmd->add_option("--jobs", o->build.jobs, "build parallelism (default 2)")->check(whole_in(1, 4096));
  cmd->add_option("--build-timeout", o->build.timeout_s,
                  "seconds for each step of an arm's build (worktree, "
                  "configure, build) before its process group is killed "
                  "(default 7200)")
      ->check(finite_in(1e-3, kMaxTimeoutS));
  cmd->add_option("--baselines-dir", o->baselines_dir, "folder of named baselines (default baselines)");
  add_sweep_name_option(*cmd, o->name, "sweep name (default compare-RECIPE-TIMESTAMP)");
  cmd->add_option("--resume", o->resume, "continue this compare sweep: run only the missing or killed runs");
  cmd->add_flag("--quiet", o->quiet, "no progress output");
  add_launcher_options(*cmd, o->launcher);
  cmd->add_option("command", o->command,
                  "after --: trainer command for both arms; {bin} (the arm's train_gpt), {seed}, {run_id}, {out}, "
                  "{data}, {recipe}, {gpus} are substituted");
  cmd->callback([o, cmd, &global] {
    quiet_progress_if(o->quiet);
    o->launcher_given = cmd->get_option("--launcher")->count() > 0;
    o->given = given_options(*cmd);
    adopt_command_after_dashes(global, o->command, o->given);
    global.exit_code = run_compare(*o, global);
  });
}

}  // namespace gpt::harness
