#include "harness/record/run_launcher.h"

#include <nlohmann/json.hpp>

#include "harness/launcher/safe_names.h"
#include "harness/record/slurm_launcher.h"
#include "base/check.h"

namespace gpt::harness {

namespace {

class LocalLauncher final : public RunLauncher {
 public:
  SweepRunResult run(Store& store, std::int64_t sweep_id, const std::vector<RunPlan>& plans,
                     const SweepRunOptions& options) override {
    return run_sweep(store, sweep_id, plans, options);
  }
  std::string interrupted_note() const override { return "the runs in flight were killed"; }
};

}  // namespace

CLI::Validator name_check(std::optional<std::string> (*problem)(std::string_view), const std::string& what) {
  return CLI::Validator(
      [problem](std::string& value) -> std::string {
        const auto found = problem(value);
        return found ? "'" + value + "': " + *found : std::string();
      },
      what);
}

void add_launcher_options(CLI::App& command, LauncherSettings& s) {
  command.add_option("--launcher", s.kind, "where runs execute: local child processes or one Slurm job per run")
      ->check(CLI::IsMember({"local", "slurm"}));
  const CLI::Validator slurm_name = name_check(slurm_name_problem, "SLURM_NAME");
  command.add_option("--slurm-partition", s.slurm.partition, "Slurm partition (sbatch --partition)")->check(slurm_name);
  command.add_option("--slurm-account", s.slurm.account, "Slurm account (sbatch --account)")->check(slurm_name);
  command.add_option("--slurm-qos", s.slurm.qos, "Slurm QOS (sbatch --qos)")->check(slurm_name);
  command
      .add_option("--slurm-time", s.slurm.time_minutes,
                  "job time limit in minutes (default: --timeout, else the recipe's budget)")
      ->check(CLI::PositiveNumber);
  command
      .add_option("--sbatch-arg", s.slurm.sbatch_args,
                  "extra sbatch option, e.g. --sbatch-arg=--constraint=h100 "
                  "(repeatable)")
      ->allow_extra_args(false);
  command.add_option("--srun-arg", s.slurm.srun_args, "extra srun option inside the job (repeatable)")
      ->allow_extra_args(false);
  command.add_flag("--slurm-resubmit-preempted", s.slurm.resubmit_preempted,
                   "submit a preempted run again (at most --slurm-max-resubmits times)");
  command.add_option("--slurm-max-resubmits", s.slurm.max_resubmits, "resubmissions per run (default 3)")
      ->check(CLI::NonNegativeNumber);
  command.add_option("--slurm-poll", s.slurm.poll_s, "seconds between Slurm state polls (default 2)")
      ->check(CLI::PositiveNumber);
}

void save_launcher_settings(Store& store, std::int64_t sweep_id, const LauncherSettings& s) {
  store.set_param(OwnerKind::sweep, sweep_id, "launcher", s.kind);
  if (s.kind != "slurm") return;
  const nlohmann::json slurm = {
      {"partition", s.slurm.partition},
      {"account", s.slurm.account},
      {"qos", s.slurm.qos},
      {"sbatch_args", s.slurm.sbatch_args},
      {"srun_args", s.slurm.srun_args},
      {"time_minutes", s.slurm.time_minutes ? nlohmann::json(*s.slurm.time_minutes) : nullptr},
      {"resubmit_preempted", s.slurm.resubmit_preempted},
      {"max_resubmits", s.slurm.max_resubmits},
      {"poll_s", s.slurm.poll_s}};
  store.set_param(OwnerKind::sweep, sweep_id, "slurm", slurm.dump());
}

LauncherSettings load_launcher_settings(Store& store, std::int64_t sweep_id, const LauncherSettings& given,
                                        bool launcher_given) {
  if (launcher_given) return given;
  const auto params = store.params(OwnerKind::sweep, sweep_id);
  LauncherSettings s = given;
  if (params.count("launcher")) s.kind = params.at("launcher");
  if (s.kind == "slurm" && params.count("slurm")) {
    try {
      const auto j = nlohmann::json::parse(params.at("slurm"));
      s.slurm.partition = j.value("partition", "");
      s.slurm.account = j.value("account", "");
      s.slurm.qos = j.value("qos", "");
      s.slurm.sbatch_args = j.value("sbatch_args", std::vector<std::string>{});
      s.slurm.srun_args = j.value("srun_args", std::vector<std::string>{});
      if (j.contains("time_minutes") && !j.at("time_minutes").is_null())
        s.slurm.time_minutes = j.at("time_minutes").get<int>();
      s.slurm.resubmit_preempted = s.slurm.resubmit_preempted || j.value("resubmit_preempted", false);
      s.slurm.max_resubmits = j.value("max_resubmits", 3);
      s.slurm.poll_s = given.slurm.poll_s != SlurmSettings{}.poll_s ? given.slurm.poll_s : j.value("poll_s", 2.0);
    } catch (const std::exception& e) {
      GPT_FAIL("--resume: the sweep's stored Slurm settings are unreadable (sweep param 'slurm'): ", e.what());
    }
  }
  return s;
}

std::unique_ptr<RunLauncher> make_launcher(const LauncherSettings& settings, const std::string& recipe, int gpus) {
  if (settings.kind == "slurm") return slurm::make_slurm_launcher(settings.slurm, recipe, gpus);
  GPT_CHECK(settings.kind == "local", "--launcher: expected local or slurm, got '", settings.kind, "'");
  return std::make_unique<LocalLauncher>();
}

}  // namespace gpt::harness
