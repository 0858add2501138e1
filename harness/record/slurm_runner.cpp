// The Slurm launcher's loop: submit (or adopt) one job per run, poll the controller, store each run as its job
// ends. See slurm_launcher.h for the job layout and the state mapping.
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "harness/launcher/atomic_file.h"
#include "harness/launcher/safe_files.h"
#include "harness/record/slurm_launcher.h"
#include "harness/launcher/slurm_util.h"
#include "harness/record/spool.h"
#include "base/check.h"

namespace gpt::harness::slurm {

namespace fs = std::filesystem;

namespace {

// <out>/slurm_job.json: the run's current job, so another harness can adopt it.
struct JobFile {
  std::string job_id;
  int attempt = 1;
  bool harvested = false;  // the job's end is stored; a --resume must submit a new job

  static fs::path path(const RunPlan& plan) { return plan.out_dir / "slurm_job.json"; }
  static std::optional<JobFile> load(const RunPlan& plan) {
    std::ifstream in(path(plan));
    if (!in) return std::nullopt;
    try {
      const auto j = nlohmann::json::parse(in);
      return JobFile{j.at("job_id").get<std::string>(), j.value("attempt", 1), j.value("harvested", false)};
    } catch (const std::exception& e) {
      spdlog::warn("ignoring unreadable {} ({})", path(plan).string(), e.what());
      return std::nullopt;
    }
  }
  void save(const RunPlan& plan) const {
    write_text_atomically(
        path(plan), nlohmann::json{{"job_id", job_id}, {"attempt", attempt}, {"harvested", harvested}}.dump() + "\n");
  }
};

struct Tracked {
  const RunPlan* plan;
  JobFile job;
  int unknown_polls = 0;  // polls in which no source knew the job
};

class SlurmLauncher final : public RunLauncher {
 public:
  SlurmLauncher(SlurmSettings settings, std::string recipe, int gpus)
      : settings_(std::move(settings)), recipe_(std::move(recipe)), gpus_(gpus) {}

  SweepRunResult run(Store& store, std::int64_t sweep_id, const std::vector<RunPlan>& plans,
                     const SweepRunOptions& options) override {
    options_ = &options;
    shape_.gpus = gpus_;
    shape_.time_minutes = settings_.time_minutes;
    if (!shape_.time_minutes) {
      shape_.time_minutes =
          options.timeout_s ? static_cast<int>((*options.timeout_s + 59) / 60) : default_time_minutes(recipe_);
    }
    const auto sweep = store.find_sweep(std::to_string(sweep_id));
    job_name_ = sweep ? sweep->name : "speedrun";
    total_ = static_cast<int>(plans.size());
    SweepRunResult result;
    std::vector<Tracked> active;
    for (const auto& plan : plans) {
      make_folders_below(plan.out_dir.parent_path(), plan.out_dir.filename());
      auto existing = JobFile::load(plan);
      if (existing && !existing->harvested) {
        say("seed " + std::to_string(plan.seed) + ": adopting Slurm job " + existing->job_id);
        active.push_back({&plan, *existing, 0});
      } else {
        active.push_back({&plan, submit(plan, existing ? existing->attempt + 1 : 1), 0});
      }
    }
    while (!active.empty()) {
      if (InterruptGuard::requested()) {
        result.interrupted = true;
        break;
      }
      auto polled = poll(active);
      if (!polled) {  // Slurm did not answer in time: judge nothing this round
        sleep_interruptibly();
        continue;
      }
      auto& states = *polled;
      for (auto it = active.begin(); it != active.end();) {
        auto found = states.find(it->job.job_id);
        if (found == states.end()) {
          // Unknown to the controller and to accounting, and no exit file yet: give a just-submitted job a
          // few polls before calling it lost.
          if (++it->unknown_polls < 5) {
            ++it;
            continue;
          }
          found = states.emplace(it->job.job_id, JobState{it->job.job_id, "LOST", 1, 0, ""}).first;
        }
        if (is_active(found->second.state)) {
          it->unknown_polls = 0;
          ++it;
          continue;
        }
        const Outcome outcome = outcome_of(found->second);
        if (outcome.preempted && settings_.resubmit_preempted && it->job.attempt <= settings_.max_resubmits) {
          it->job.harvested = true;
          it->job.save(*it->plan);
          say("seed " + std::to_string(it->plan->seed) + ": Slurm job " + it->job.job_id +
              " was preempted; resubmitting");
          it->job = submit(*it->plan, it->job.attempt + 1);
          ++it;
          continue;
        }
        store_run(store, sweep_id, *it, outcome, result);
        it = active.erase(it);
      }
      if (active.empty()) break;
      sleep_interruptibly();
    }
    if (result.interrupted) {
      say(std::to_string(active.size()) + " Slurm job(s) keep running; `harness record --resume " + job_name_ +
          "` collects them (`scancel --name=" + job_name_ + "` stops them)");
    }
    return result;
  }

  std::string interrupted_note() const override { return "the submitted Slurm jobs keep running"; }

 private:
  void say(const std::string& line) const {
    if (options_ && options_->progress) *options_->progress << line << "\n" << std::flush;
  }

  void sleep_interruptibly() const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(settings_.poll_s);
    while (std::chrono::steady_clock::now() < until && !InterruptGuard::requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  JobFile submit(const RunPlan& plan, int attempt) {
    // A new job of the run starts in an empty folder (no job of it is live: an unharvested one is adopted, never
    // resubmitted), so that the run is judged by what this job writes alone.
    empty_run_folder(plan.out_dir);
    const fs::path script = plan.out_dir / "slurm_job.sh";
    write_text_atomically(script, batch_script(plan, shape_, settings_));
    std::vector<std::string> argv = {"sbatch", "--parsable", "--job-name=" + job_name_};
    argv.insert(argv.end(), settings_.sbatch_args.begin(), settings_.sbatch_args.end());
    argv.push_back(script.string());
    const auto r = run_command(argv);
    GPT_CHECK(r.status == 0, "sbatch failed for run ", plan.run_id, " (status ", r.status,
              "): ", r.err.empty() ? r.out : r.err);
    std::string id = r.out.substr(0, r.out.find_first_of(";\n\r"));
    GPT_CHECK(!id.empty() && id.find_first_not_of("0123456789_") == std::string::npos, "sbatch for run ", plan.run_id,
              " printed no job id: '", r.out, "'");
    JobFile job{id, attempt, false};
    job.save(plan);
    say("seed " + std::to_string(plan.seed) + ": submitted as Slurm job " + id +
        (attempt > 1 ? " (attempt " + std::to_string(attempt) + ")" : ""));
    return job;
  }

  // Every tracked job's state: scontrol for jobs the controller remembers, then sacct, then exit files. Nothing
  // when a Slurm tool hung past its limit (a controller restarting): no job is called lost for that.
  std::optional<std::map<std::string, JobState>> poll(const std::vector<Tracked>& active) const {
    try {
      return poll_once(active);
    } catch (const CommandTimedOut& e) {
      say(std::string(e.what()) + "; polling again");
      return std::nullopt;
    }
  }

  std::map<std::string, JobState> poll_once(const std::vector<Tracked>& active) const {
    std::map<std::string, JobState> states;
    const auto ctl = run_command({"scontrol", "show", "job", "-o"});
    if (ctl.status == 0) {
      for (auto& j : parse_scontrol(ctl.out)) states.emplace(j.job_id, std::move(j));
    }
    for (const auto& t : active) {
      if (states.count(t.job.job_id)) continue;
      const auto acct = run_command({"sacct", "-n", "-X", "-P", "-o", "JobID,State,ExitCode", "-j", t.job.job_id});
      if (acct.status == 0) {
        for (auto& j : parse_sacct(acct.out)) {
          if (j.job_id == t.job.job_id) states.emplace(j.job_id, std::move(j));
        }
      }
      if (states.count(t.job.job_id)) continue;
      std::ifstream exit_file(t.plan->out_dir / ("slurm-" + t.job.job_id + ".exit"));
      int code = 0;
      if (exit_file >> code)
        states.emplace(t.job.job_id, JobState{t.job.job_id, code == 0 ? "COMPLETED" : "FAILED", code, 0, ""});
    }
    return states;
  }

  void store_run(Store& store, std::int64_t sweep_id, Tracked& t, const Outcome& outcome, SweepRunResult& result) {
    RunPlan plan = *t.plan;
    plan.log_path = plan.out_dir / ("slurm-" + t.job.job_id + ".log");
    const std::optional<double> limit_s =
        shape_.time_minutes ? std::optional<double>(*shape_.time_minutes * 60.0) : options_->timeout_s;
    RunRecord record = harvest_run(plan, outcome.exit, outcome.end, limit_s);
    if (outcome.forced_status) record.status = *outcome.forced_status;
    if (!outcome.note.empty()) record.reason = outcome.note + (record.reason.empty() ? "" : ": " + record.reason);
    if (outcome.preempted) record.reason += " (re-run by `harness record --resume`)";
    record.wall_time_s.reset();  // the harness did not watch the job start; Slurm's accounting has the times
    record.sweep_id = sweep_id;
    record.environment_id = options_->environment_id;
    // Spool first, then insert, as local runs do: a locked database cannot lose a finished job's run.
    if (!spool_and_store(store, t.plan->out_dir, record, options_->insert_retry)) {
      ++result.spooled;
      say("database still locked: run " + record.run_id + " kept in '" + (t.plan->out_dir / kSpoolFileName).string() +
          "'; the next harness command stores it");
    }
    t.job.harvested = true;
    t.job.save(*t.plan);
    ++result.finished;
    std::string line = "[" + std::to_string(result.finished) + "/" + std::to_string(total_) + "] seed " +
                       std::to_string(plan.seed) + " " + std::string(to_string(record.status)) + " (Slurm job " +
                       t.job.job_id + ")";
    if (record.final_val_loss) line += "  val_loss " + std::to_string(*record.final_val_loss);
    if (!record.reason.empty()) line += "  (" + record.reason + ")";
    say(line);
  }

  SlurmSettings settings_;
  std::string recipe_;
  int gpus_;
  JobShape shape_;
  std::string job_name_;
  int total_ = 0;
  const SweepRunOptions* options_ = nullptr;
};

}  // namespace

std::unique_ptr<RunLauncher> make_slurm_launcher(const SlurmSettings& settings, const std::string& recipe, int gpus) {
  return std::make_unique<SlurmLauncher>(settings, recipe, gpus);
}

}  // namespace gpt::harness::slurm
