// `harness record`: N seeded runs of the trainer (or of any command), each stored as it finishes, then the
// record report (one-sided t-test of the mean final val loss against the target).
#include "harness/commands/record.h"

#include <iostream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include <spdlog/spdlog.h>

#include "harness/commands/common.h"
#include "harness/commands/recipe_target.h"
#include "harness/commands/sweep_lifecycle.h"
#include "harness/record/run_launcher.h"
#include "harness/launcher/safe_names.h"
#include "harness/record/environment_probe.h"
#include "harness/record/spool.h"
#include "harness/record/sweep_runner.h"
#include "harness/report/html_report.h"
#include "harness/report/sweep_report.h"
#include "base/check.h"
#include "base/utc_time.h"

namespace gpt::harness {

namespace {

struct RecordOptions {
  int runs = 0;
  std::string recipe = "tiny";
  int gpus = 0;                  // 0: not passed to the trainer
  std::optional<double> target;  // --target; not given: the recipe's [record] target
  double alpha = 0.01;
  std::string resume;
  double timeout_s = 0;  // 0: none
  int parallel = 1;
  bool track3 = false;
  std::string format = "text";
  std::string data;
  std::string trainer;
  std::string backend;            // passed as --backend (train_gpt's default, cpu, when empty)
  std::vector<std::string> sets;  // passed as --set KEY=VALUE each
  std::string name;
  std::int64_t first_seed = 0;
  std::int64_t early_stop_step = 0;  // 0: none (a run is ok only at the total step count)
  bool quiet = false;
  std::vector<std::string> command;
  LauncherSettings launcher;  // --launcher local|slurm and the --slurm-* options
  bool launcher_given = false;
  std::vector<std::string> given;  // the options on the command line (their first long names)
};

// The command template of a new sweep: the user's CMD, or train_gpt with the contract's flags.
std::vector<std::string> command_template(const RecordOptions& o) {
  if (!o.command.empty()) return o.command;
  const std::filesystem::path trainer = o.trainer.empty() ? default_trainer() : std::filesystem::path(o.trainer);
  GPT_CHECK(std::filesystem::exists(trainer), "record: no trainer at '", trainer.string(),
            "' (build the train_gpt target, pass --trainer PATH, or give a command after --)");
  return trainer_command_template(trainer.string(), o.gpus, o.backend, o.sets);
}

// --resume SWEEP [--runs N]: the sweep's stored settings; --runs can only extend it.
SweepInfo resume_sweep(Store& store, RecordOptions& o, const std::filesystem::path& db) {
  SweepInfo sweep = find_sweep_to_resume(store, o.resume, "record", db);
  const SweepParams params(store, sweep);
  const SweepRunSettings stored = SweepRunSettings::load(params);  // read whole before anything is changed
  const auto early_stop_step = params.optional_integer("early_stop_step");
  const bool track3 = params.flag("track3");
  extend_planned_runs(store, sweep, o.runs, /*arms=*/1);
  o.runs = sweep.runs_planned;
  o.early_stop_step = early_stop_step.value_or(0);
  o.first_seed = stored.first_seed;
  o.recipe = sweep.recipe;
  o.data = stored.data;
  o.gpus = sweep.gpus;
  o.timeout_s = stored.timeout_s;
  o.track3 = track3;
  if (sweep.target && !o.target) o.target = *sweep.target;
  GPT_CHECK(o.target.has_value(), "--resume: sweep '", sweep.name, "' has no stored target; pass --target LOSS");
  if (sweep.alpha) o.alpha = *sweep.alpha;
  o.launcher = load_launcher_settings(store, sweep.id, o.launcher, o.launcher_given);
  return sweep;
}

// A new sweep: its target (given, or the recipe's [record] target) and the settings --resume and reports need.
SweepInfo create_sweep(Store& store, RecordOptions& o) {
  GPT_CHECK(o.runs >= 1, "--runs: give the number of runs (>= 1), or --resume SWEEP");
  check_seed_range(o.first_seed, o.runs);
  if (o.data.empty()) o.data = default_data_dir(o.recipe);
  const std::vector<std::string> argv_template = command_template(o);
  check_data_folder(argv_template, o.data, o.launcher);
  std::string target_source = "--target";
  if (o.target && o.command.empty()) {
    // The trainer is asked about the recipe and overrides before the first run (without --target, reading the
    // target below asks it): an unknown recipe or key fails here, exit 2, not as a sweep of failed runs.
    const RecipeCheck check = check_recipe(argv_template.front(), o.recipe, o.sets);
    if (check.verdict == RecipeCheck::Verdict::refused) {
      std::string given = "--recipe " + o.recipe;
      for (const auto& set : o.sets) given += " --set " + set;
      GPT_FAIL("record: the trainer '", argv_template.front(), "' refuses `", given, "`: ", check.message,
               "; nothing was run");
    }
  }
  if (!o.target) {
    const std::filesystem::path trainer = o.trainer.empty() ? default_trainer() : std::filesystem::path(o.trainer);
    RecipeTarget from_recipe;
    try {
      from_recipe = read_recipe_target(trainer, o.recipe, o.sets);
    } catch (const gpt::Error& e) {
      GPT_FAIL("record: no --target given, and ", e.what(), "; pass --target LOSS (or --trainer PATH)");
    }
    o.target = from_recipe.target;
    target_source = "recipe " + o.recipe + " [record]: " + from_recipe.source;
    if (!o.quiet) spdlog::info("target {} from {}", *o.target, target_source);
  }
  SweepInfo sweep;
  sweep.name = o.name.empty() ? to_path_name("record-" + o.recipe + "-" + utc_compact_now()) : o.name;
  sweep.kind = "record";
  sweep.recipe = o.recipe;
  sweep.command = nlohmann::json(argv_template).dump();
  sweep.target = o.target;
  sweep.alpha = o.alpha;
  sweep.runs_planned = o.runs;
  sweep.gpus = o.gpus;
  sweep.environment_id = store.upsert_environment(probe_environment());
  // A default name gets -2, -3 ... when taken (decided under the write lock); a given --name is refused instead.
  store.create_sweep_unique(sweep, /*name_given=*/!o.name.empty());
  sweep = *store.find_sweep(std::to_string(sweep.id));
  SweepParams params(store, sweep);
  SweepRunSettings{o.first_seed, o.data, o.timeout_s}.save(params);
  params.set_flag("track3", o.track3);
  params.set_text("target_source", target_source);
  if (o.early_stop_step > 0) params.set_integer("early_stop_step", o.early_stop_step);
  if (o.track3) store.add_tag(OwnerKind::sweep, sweep.id, "track3");
  save_launcher_settings(store, sweep.id, o.launcher);
  return sweep;
}

int run_record(const RecordOptions& cli, GlobalOptions& global) {
  Store store = open_store(global);  // also stores runs an earlier harness left spooled
  RecordOptions o = cli;
  GPT_CHECK((o.backend.empty() && o.sets.empty()) || o.command.empty(),
            "--backend/--set: pass them to the trainer of a new sweep only (a command after -- or a --resume sweep "
            "keeps its own command line)");
  if (!o.resume.empty()) {
    refuse_options_on_resume(
        o.given, [](const std::string& option) { return option != "--backend" && option != "--set"; },
        "the sweep keeps its trainer command line (--backend and --set go to the trainer of a new sweep only)",
        "start a new sweep to run the trainer with other flags");
  }
  const SweepInfo sweep =
      o.resume.empty() ? create_sweep(store, o) : resume_sweep(store, o, resolve_db_path(global.db));
  const auto argv_template = nlohmann::json::parse(sweep.command).get<std::vector<std::string>>();
  PlannedArm arm;
  arm.values = {{"recipe", o.recipe}, {"data", o.data}, {"gpus", std::to_string(std::max(o.gpus, 1))}};
  if (o.early_stop_step > 0) arm.early_stop_step = o.early_stop_step;
  const auto run_root = sweep_runs_dir(global, sweep.name);
  const SweepHold hold = SweepHold::take(run_root, sweep.name);  // before planning: one harness per sweep
  // Made (and checked: no symbolic link below the database's folder) before the runs, not after all of them.
  const auto reports_dir = sweep_reports_dir(global, sweep.name);
  const std::vector<RunPlan> plans =
      plan_missing_runs(store, sweep, argv_template, {arm}, o.first_seed, o.runs, run_root);
  const SweepCall call = run_sweep_plans(
      store, sweep, plans, SweepExecution{o.parallel, o.timeout_s, o.gpus, o.quiet, o.launcher}, run_root, "record");

  const SweepReport report = build_sweep_report(store, sweep, ReportOptions{*o.target, o.alpha, o.track3});
  const auto md = write_report_files(report, reports_dir);
  write_sweep_html(store, report, md.parent_path());  // report.html beside report.md
  if (o.format == "json") {
    auto doc = to_json(report);
    doc["interrupted"] = call.ran.interrupted;
    doc["report_path"] = md.string();
    std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << render_text(report) << "report: " << md.string() << "\n";
  }
  return sweep_exit_code(call, sweep, report.pass ? kExitPass : kExitFail);
}

}  // namespace

void add_record_command(CLI::App& app, GlobalOptions& global) {
  auto opts = std::make_shared<RecordOptions>();
  CLI::App* sub = app.add_subcommand("record", "run N seeded runs and test the mean val loss against the target");
  sub->add_option("--runs", opts->runs, "number of seeded runs")->check(whole_in(1, kMaxRuns));
  sub->add_option("--recipe", opts->recipe, "trainer recipe (default tiny)");
  sub->add_option("--gpus", opts->gpus, "GPUs per run (passed as --gpus; partitions devices with --parallel)")
      ->check(whole_in(1, 4096));
  sub->add_option("--target", opts->target,
                  "target val loss (default: the recipe's [record] target, read with `train_gpt --print-recipe`)")
      ->check(finite_in(0, kMaxTargetLoss));
  sub->add_option("--alpha", opts->alpha, "significance level (default 0.01)")->check(finite_in(1e-12, 0.999999));
  sub->add_option("--resume", opts->resume,
                  "continue this sweep (id or name): run only the missing seeds; with --runs N, extend it to N runs");
  sub->add_option("--timeout", opts->timeout_s, "seconds per run before its process group is killed")
      ->check(finite_in(0, kMaxTimeoutS));
  sub->add_option("--parallel", opts->parallel, "runs at once (CUDA_VISIBLE_DEVICES partitions)")
      ->check(whole_in(1, 4096));
  sub->add_flag("--track3", opts->track3, "judge with the track-3 rule (target - mean) * sqrt(n) >= 0.004");
  sub->add_option("--format", opts->format, "report format")->check(CLI::IsMember({"text", "json"}));
  sub->add_option("--data", opts->data, "data folder (default: the recipe's corpus, data/default for tiny)");
  sub->add_option("--trainer", opts->trainer, "trainer binary (default: train_gpt beside harness)");
  sub->add_option("--backend", opts->backend, "trainer backend, passed as --backend (default: the trainer's, cpu)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  sub->add_option("--set", opts->sets, "recipe override KEY=VALUE passed to every run as --set (repeatable)")
      ->allow_extra_args(false);
  add_sweep_name_option(*sub, opts->name, "sweep name (default record-RECIPE-TIMESTAMP)");
  sub->add_option("--first-seed", opts->first_seed, "seed of the first run; run i uses first-seed + i")
      ->check(whole_in(0, std::numeric_limits<std::int64_t>::max()));
  sub->add_option("--early-stop-step", opts->early_stop_step,
                  "opt-in early-stop rule: a run ending on a validation at this step is complete (default: only "
                  "a validation at the total step count is a final result)")
      ->check(whole_in(1, std::numeric_limits<std::int64_t>::max()));
  sub->add_flag("--quiet", opts->quiet, "no progress output");
  add_launcher_options(*sub, opts->launcher);
  sub->add_option("command", opts->command,
                  "command to run instead of train_gpt (after --); may use {seed}, "
                  "{run_id}, {out}, {data}, {recipe}, {gpus}");
  sub->callback([opts, sub, &global] {
    quiet_progress_if(opts->quiet);
    opts->launcher_given = sub->get_option("--launcher")->count() > 0;
    opts->given = given_options(*sub);
    adopt_command_after_dashes(global, opts->command, opts->given);
    global.exit_code = run_record(*opts, global);
  });
}

}  // namespace gpt::harness
