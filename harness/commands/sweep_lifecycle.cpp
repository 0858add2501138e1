#include "harness/commands/sweep_lifecycle.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <set>

#include "harness/commands/common.h"
#include "harness/compare/comparison.h"
#include "harness/record/spool.h"
#include "base/check.h"
#include "base/log.h"

#include <spdlog/spdlog.h>

namespace gpt::harness {

std::string default_data_dir(const std::string& recipe) {
  if (recipe == "tiny" || recipe == "tiny-ext") return "data/default";  // the CPU recipes
  return "data/fineweb10B";
}

std::filesystem::path default_trainer() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return (ec ? std::filesystem::path(".") : self.parent_path()) / "train_gpt";
}

std::string substitute_placeholders(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [key, value] : values) {
    const std::string pattern = "{" + key + "}";
    for (size_t pos = text.find(pattern); pos != std::string::npos; pos = text.find(pattern, pos + value.size())) {
      text.replace(pos, pattern.size(), value);
    }
  }
  return text;
}

std::vector<std::string> trainer_command_template(const std::string& trainer, int gpus, const std::string& backend,
                                                  const std::vector<std::string>& sets) {
  std::vector<std::string> argv = {trainer,  "--recipe", "{recipe}", "--data", "{data}", "--seed",
                                   "{seed}", "--run-id", "{run_id}", "--out",  "{out}"};
  if (gpus > 0) argv.insert(argv.end(), {"--gpus", "{gpus}"});
  if (!backend.empty()) argv.insert(argv.end(), {"--backend", backend});
  for (const std::string& set : sets) argv.insert(argv.end(), {"--set", set});
  return argv;
}

// ---- SweepParams ----

SweepParams::SweepParams(Store& store, const SweepInfo& sweep)
    : store_(&store), sweep_id_(sweep.id), sweep_name_(sweep.name), values_(store.params(OwnerKind::sweep, sweep.id)) {}

std::string SweepParams::text(const std::string& key) const {
  const auto it = values_.find(key);
  GPT_CHECK(it != values_.end(), "--resume: sweep '", sweep_name_, "' lacks its '", key, "' parameter");
  return it->second;
}

void SweepParams::malformed(const std::string& key, const char* expected) const {
  GPT_FAIL("sweep '", sweep_name_, "' (id ", sweep_id_, "): its stored parameter '", key, "' is '", values_.at(key),
           "', expected ", expected, "; the database was changed outside the harness or is damaged");
}

std::int64_t SweepParams::integer(const std::string& key) const {
  const std::string value = text(key);
  std::int64_t parsed = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc() || end != value.data() + value.size() || value.empty()) malformed(key, "an integer");
  return parsed;
}

double SweepParams::number(const std::string& key) const {
  const std::string value = text(key);
  double parsed = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc() || end != value.data() + value.size() || value.empty()) malformed(key, "a number");
  return parsed;
}

bool SweepParams::flag(const std::string& key) const {
  const std::string value = text(key);
  if (value != "0" && value != "1") malformed(key, "1 or 0");
  return value == "1";
}

std::optional<std::int64_t> SweepParams::optional_integer(const std::string& key) const {
  if (!has(key)) return std::nullopt;
  return integer(key);
}

void SweepParams::set_text(const std::string& key, const std::string& value) {
  store_->set_param(OwnerKind::sweep, sweep_id_, key, value);
  values_[key] = value;
}

void SweepParams::set_integer(const std::string& key, std::int64_t value) { set_text(key, std::to_string(value)); }

void SweepParams::set_number(const std::string& key, double value) { set_text(key, std::to_string(value)); }

void SweepParams::set_flag(const std::string& key, bool value) { set_text(key, value ? "1" : "0"); }

void SweepRunSettings::save(SweepParams& params) const {
  params.set_integer("first_seed", first_seed);
  params.set_text("data", data);
  params.set_number("timeout_s", timeout_s);
}

SweepRunSettings SweepRunSettings::load(const SweepParams& params) {
  return SweepRunSettings{params.integer("first_seed"), params.text("data"), params.number("timeout_s")};
}

// ---- resuming ----

std::vector<std::string> given_options(const CLI::App& command) {
  std::vector<std::string> given;
  for (const CLI::Option* option : command.get_options()) {
    if (option->count() > 0) given.push_back(option->nonpositional() ? option->get_name() : "-- CMD");
  }
  return given;
}

void refuse_options_on_resume(const std::vector<std::string>& given,
                              const std::function<bool(const std::string&)>& applies, const std::string& why,
                              const std::string& instead) {
  std::string refused;
  for (const auto& option : given) {
    if (!applies(option)) refused += (refused.empty() ? "" : ", ") + option;
  }
  GPT_CHECK(refused.empty(), "--resume: ", why, ", so ", refused, " cannot apply; ", instead);
}

SweepInfo find_sweep_to_resume(Store& store, const std::string& id_or_name, const std::string& kind,
                               const std::filesystem::path& db) {
  const auto found = store.find_sweep(id_or_name);
  GPT_CHECK(found.has_value(), "--resume: no sweep '", id_or_name, "' in '", db.string(), "'");
  const bool resumable = found->kind == "record" || found->kind == "compare";
  GPT_CHECK(found->kind == kind, "--resume: sweep '", id_or_name, "' is a ", found->kind, " sweep, not a ", kind,
            " sweep", resumable ? "; `harness " + found->kind + " --resume` continues it" : std::string());
  return *found;
}

void extend_planned_runs(Store& /*store*/, SweepInfo& sweep, int runs_per_arm, int arms) {
  const char* unit = arms == 1 ? " runs" : " runs per arm";
  const int planned_per_arm = sweep.runs_planned / arms;
  GPT_CHECK(runs_per_arm == 0 || arms * runs_per_arm >= sweep.runs_planned, "--runs ", runs_per_arm,
            " with --resume: sweep '", sweep.name, "' already has ", planned_per_arm, arms == 1 ? " planned" : "", unit,
            "; --runs can only extend it");
  // Only in memory here: run_sweep_plans stores the new plan once the runs start, so a resume refused on the way
  // (a bad option, a missing trainer) leaves the stored plan as it was.
  if (arms * runs_per_arm > sweep.runs_planned) {
    spdlog::info("sweep \"{}\" extended from {} to {}{}", sweep.name, planned_per_arm, runs_per_arm, unit);
    sweep.runs_planned = arms * runs_per_arm;
  }
}

// ---- planning and running ----

void check_data_folder(const std::vector<std::string>& argv_template, const std::string& data,
                       const LauncherSettings& launcher) {
  if (launcher.kind != "local") return;
  const bool uses_data = std::any_of(argv_template.begin(), argv_template.end(),
                                     [](const std::string& arg) { return arg.find("{data}") != std::string::npos; });
  if (!uses_data) return;
  std::error_code ec;
  GPT_CHECK(std::filesystem::is_directory(data, ec), "--data: no folder '", data,
            "' (the runs read their shards there; pass --data DIR, or build the corpus: docs/CORPUS.md)");
}

SweepHold SweepHold::take(const std::filesystem::path& run_root, const std::string& sweep_name) {
  const std::filesystem::path path = run_root / "sweep.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  GPT_CHECK(fd >= 0, "sweep '", sweep_name, "': cannot open its lock file '", path.string(),
            "': ", std::strerror(errno));
  SweepHold hold(fd);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const ssize_t n = ::pread(fd, pid, sizeof pid - 1, 0);
    GPT_FAIL("sweep '", sweep_name, "' is being run by another harness",
             n > 0 ? " (pid " + std::string(pid, static_cast<size_t>(n)) + ")" : "",
             "; two at once would run the same seeds twice; wait for it to end, then --resume ", sweep_name);
  }
  const std::string me = std::to_string(::getpid());
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, me.data(), me.size(), 0) < 0) {
    spdlog::debug("sweep '{}': could not write the holder's pid to '{}'", sweep_name, path.string());
  }
  return hold;
}

SweepHold::~SweepHold() {
  if (fd_ >= 0) ::close(fd_);
}

void check_seed_range(std::int64_t first_seed, int runs) {
  GPT_CHECK(first_seed >= 0, "--first-seed: expected a seed >= 0 (train_gpt's seed is unsigned), got ", first_seed);
  GPT_CHECK(runs <= 0 || first_seed <= std::numeric_limits<std::int64_t>::max() - (runs - 1), "--first-seed ",
            first_seed, " with --runs ", runs, ": the last seed would be beyond ",
            std::numeric_limits<std::int64_t>::max(), " (the largest seed a run can be stored with)");
}

std::vector<RunPlan> plan_missing_runs(Store& store, const SweepInfo& sweep,
                                       const std::vector<std::string>& argv_template,
                                       const std::vector<PlannedArm>& arms, std::int64_t first_seed, int runs_per_arm,
                                       const std::filesystem::path& run_root) {
  // Seeds already finished (anything but killed) are skipped: --resume runs only what is missing.
  std::map<std::string, std::set<std::int64_t>> done;
  for (const auto& r : store.runs(sweep.id)) {
    if (r.seed && r.status != RunStatus::killed) done[r.arm].insert(*r.seed);
  }
  check_seed_range(first_seed, runs_per_arm);
  std::vector<RunPlan> plans;
  for (const compare::InterleavedRun& run :
       compare::interleaved_order(arms.size(), static_cast<size_t>(std::max(runs_per_arm, 0)))) {
    const std::int64_t seed = first_seed + static_cast<std::int64_t>(run.seed_offset);  // in range: check_seed_range
    const PlannedArm& arm = arms[run.arm];
    if (done[arm.name].count(seed)) continue;
    RunPlan plan;
    plan.arm = arm.name;
    plan.seed = seed;
    plan.run_id = sweep.name + (arm.name.empty() ? "" : "-" + arm.name) + "-seed" + std::to_string(seed);
    plan.out_dir = run_root / plan.run_id;
    plan.log_path = plan.out_dir / "console.log";
    std::map<std::string, std::string> values = arm.values;
    values["seed"] = std::to_string(seed);
    values["run_id"] = plan.run_id;
    values["out"] = plan.out_dir.string();
    for (const auto& arg : argv_template) plan.argv.push_back(substitute_placeholders(arg, values));
    plan.argv.insert(plan.argv.end(), arm.extra_args.begin(), arm.extra_args.end());
    plan.early_stop_step = arm.early_stop_step;
    plan.params = arm.params;
    plans.push_back(std::move(plan));
  }
  return plans;
}

namespace {

SweepRunResult execute_sweep_plans(Store& store, const SweepInfo& sweep, const std::vector<RunPlan>& plans,
                                   const SweepExecution& e, const std::filesystem::path& run_root) {
  SweepRunOptions run_options;
  run_options.parallel = e.parallel;
  if (e.timeout_s > 0) run_options.timeout_s = e.timeout_s;
  if (e.parallel > 1) {
    run_options.device_partitions =
        device_partitions(e.parallel, std::max(e.gpus, 1), std::getenv("CUDA_VISIBLE_DEVICES"));
  }
  run_options.environment_id = sweep.environment_id;
  // The command's --quiet or the global --quiet / --log-level above info: no progress.
  if (!e.quiet && gpt::log::enabled(spdlog::level::info)) {
    run_options.progress = &std::cerr;
    run_options.progress_is_tty = ::isatty(STDERR_FILENO) != 0;
    spdlog::info("sweep {} \"{}\": {} run(s) to go of {}, outputs in {}", sweep.id, sweep.name, plans.size(),
                 sweep.runs_planned, run_root.string());
  }
  SweepRunResult ran;
  {
    InterruptGuard guard;
    ran = make_launcher(e.launcher, sweep.recipe, e.gpus)->run(store, sweep.id, plans, run_options);
  }
  if (ran.spooled > 0) {
    // The lock may have cleared while the report was due: one more try before reporting.
    try {
      store_spooled_runs(store, run_root.parent_path());
    } catch (const sql::BusyError&) {
      // Still locked: the runs stay spooled for the next command; the report covers what is stored.
    }
  }
  return ran;
}

// Runs not started (busy folders) and runs left spooled, told on stderr; returns how many of `plans` are still in
// their spool files.
int report_unstored_runs(const SweepRunResult& ran, const std::vector<RunPlan>& plans, const std::string& resume_hint) {
  if (ran.busy > 0) {
    spdlog::warn(
        "{} run(s) not started: their folders are in use by live processes (see above); `{}` starts them "
        "once those have ended",
        ran.busy, resume_hint);
  }
  int spooled = 0;
  for (const auto& plan : plans) {
    if (std::filesystem::exists(plan.out_dir / kSpoolFileName)) {
      ++spooled;
      spdlog::warn("run {} is kept in its spool file (database locked); the next harness command stores it",
                   plan.run_id);
    }
  }
  if (spooled > 0) {
    spdlog::warn(
        "spooled: {} finished run(s) are kept in spool files because the database was busy; the result "
        "above leaves them out. `{}` stores them (exit {})",
        spooled, resume_hint, kExitSpooled);
  }
  return spooled;
}

std::string resume_hint(const std::string& command, const SweepInfo& sweep) {
  return "harness " + command + " --resume " + sweep.name;
}

}  // namespace

SweepCall run_sweep_plans(Store& store, const SweepInfo& sweep, const std::vector<RunPlan>& plans,
                          const SweepExecution& execution, const std::filesystem::path& run_root,
                          const std::string& command) {
  SweepCall call;
  call.command = command;
  const auto stored = store.find_sweep(std::to_string(sweep.id));
  if (stored && sweep.runs_planned > stored->runs_planned) store.set_runs_planned(sweep.id, sweep.runs_planned);
  call.ran = execute_sweep_plans(store, sweep, plans, execution, run_root);
  call.spooled = report_unstored_runs(call.ran, plans, resume_hint(command, sweep));
  return call;
}

int sweep_exit_code(const SweepCall& call, const SweepInfo& sweep, int verdict) {
  if (call.ran.interrupted) {
    spdlog::warn("interrupted: {} run(s) of this call stored; continue with `{}`", call.ran.finished,
                 resume_hint(call.command, sweep));
    return kExitInterrupted;
  }
  return call.spooled > 0 ? kExitSpooled : verdict;
}

}  // namespace gpt::harness
