#include "harness/record/slurm_launcher.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "harness/launcher/safe_names.h"
#include "harness/launcher/slurm_util.h"
#include "base/check.h"

namespace gpt::harness::slurm {

namespace fs = std::filesystem;

namespace {

std::map<std::string, std::string> key_values(const std::string& line) {
  std::map<std::string, std::string> out;
  std::istringstream in(line);
  std::string word;
  while (in >> word) {
    const auto eq = word.find('=');
    if (eq != std::string::npos && eq > 0) out[word.substr(0, eq)] = word.substr(eq + 1);
  }
  return out;
}

void parse_exit_code(const std::string& text, JobState& job) {
  const auto colon = text.find(':');
  try {
    job.exit_code = std::stoi(text.substr(0, colon));
    if (colon != std::string::npos) job.signal = std::stoi(text.substr(colon + 1));
  } catch (const std::exception&) {
    job.exit_code = 0, job.signal = 0;
  }
}

}  // namespace

std::vector<JobState> parse_scontrol(const std::string& text) {
  std::vector<JobState> jobs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const auto kv = key_values(line);
    if (!kv.count("JobId") || !kv.count("JobState")) continue;
    JobState job{kv.at("JobId"), kv.at("JobState"), 0, 0, kv.count("Reason") ? kv.at("Reason") : ""};
    if (kv.count("ExitCode")) parse_exit_code(kv.at("ExitCode"), job);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

std::vector<JobState> parse_sacct(const std::string& text) {
  std::vector<JobState> jobs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream row(line);
    std::string field;
    while (std::getline(row, field, '|')) fields.push_back(field);
    if (fields.size() < 3 || fields[0].empty()) continue;
    JobState job{fields[0], fields[1].substr(0, fields[1].find(' ')), 0, 0, ""};
    parse_exit_code(fields[2], job);
    jobs.push_back(std::move(job));
  }
  return jobs;
}

bool is_active(const std::string& state) {
  static const char* const kActive[] = {"PENDING",     "RUNNING",      "CONFIGURING",   "COMPLETING",  "REQUEUED",
                                        "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",      "SUSPENDED",   "SIGNALING",
                                        "STAGE_OUT",   "STOPPED",      "RESV_DEL_HOLD", "SPECIAL_EXIT"};
  for (const char* s : kActive) {
    if (state == s) return true;
  }
  return false;
}

Outcome outcome_of(const JobState& job) {
  Outcome o;
  o.note = "Slurm job " + job.job_id + " " + job.state;
  if (job.state == "COMPLETED" || job.state == "FAILED") {
    if (job.signal > 0 && job.exit_code == 0) {
      o.exit.exited = false, o.exit.signal = job.signal;
    } else {
      o.exit.exited = true, o.exit.exit_code = job.exit_code;
    }
    o.note.clear();  // the exit status and the log say everything
  } else if (job.state == "TIMEOUT" || job.state == "DEADLINE") {
    o.end = RunEnd::timed_out;
    o.exit.signal = 15;
  } else if (job.state == "CANCELLED" || job.state == "PREEMPTED") {
    o.end = RunEnd::interrupted;
    o.exit.signal = 15;
    o.preempted = job.state == "PREEMPTED";
  } else {
    // NODE_FAIL, BOOT_FAIL, OUT_OF_MEMORY and anything new: the run failed for a reason outside the trainer.
    o.exit.exited = job.exit_code != 0 || job.signal == 0;
    o.exit.exit_code = job.exit_code != 0 ? job.exit_code : 1;
    o.exit.signal = job.signal;
    o.forced_status = RunStatus::failed;
  }
  return o;
}

std::vector<std::string> without_gpus_flag(std::vector<std::string> argv) {
  for (std::size_t i = 1; i < argv.size();) {
    if (argv[i] == "--gpus" && i + 1 < argv.size()) {
      argv.erase(argv.begin() + static_cast<std::ptrdiff_t>(i), argv.begin() + static_cast<std::ptrdiff_t>(i + 2));
    } else if (argv[i].rfind("--gpus=", 0) == 0) {
      argv.erase(argv.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  return argv;
}

int default_time_minutes(const std::string& recipe) {
  // Generous budgets: a run that needs longer is stuck. Records take minutes on 8 H100s; `tiny` is a CPU smoke run.
  if (recipe == "tiny") return 15;
  if (recipe == "mini") return 30;
  return 60;
}

std::string batch_script(const RunPlan& plan, const JobShape& shape, const SlurmSettings& settings) {
  // Every value below ends up in a file bash (and sbatch, for `#SBATCH` lines) parses: names are checked to be
  // plain, everything else is quoted. A newline cannot be quoted in a comment or an `#SBATCH` line: refused.
  check_path_name("run id (the sweep name, --name)", plan.run_id);
  check_slurm_name("--slurm-partition", settings.partition);
  check_slurm_name("--slurm-account", settings.account);
  check_slurm_name("--slurm-qos", settings.qos);
  std::ostringstream o;
  o << "#!/bin/bash\n# Written by `harness record --launcher slurm` for run " << plan.run_id << ".\n";
  o << "#SBATCH --output=" << sbatch_word((plan.out_dir / "slurm-%j.log").string()) << "\n#SBATCH --nodes=1\n";
  if (shape.gpus > 0) {
    o << "#SBATCH --ntasks=" << shape.gpus << "\n#SBATCH --gpus-per-task=1\n";
  } else {
    o << "#SBATCH --ntasks=1\n";
  }
  if (shape.time_minutes) o << "#SBATCH --time=" << *shape.time_minutes << "\n";
  if (!settings.partition.empty()) o << "#SBATCH --partition=" << settings.partition << "\n";
  if (!settings.account.empty()) o << "#SBATCH --account=" << settings.account << "\n";
  if (!settings.qos.empty()) o << "#SBATCH --qos=" << settings.qos << "\n";
  o << "export SPEEDRUN_SEED=" << plan.seed << " SPEEDRUN_RUN_ID=" << shell_word(plan.run_id)
    << " SPEEDRUN_OUT=" << shell_word(plan.out_dir.string()) << "\n";
  o << "cd " << shell_word(fs::current_path().string()) << " || exit 1\nsrun";
  for (const auto& a : settings.srun_args) o << " " << shell_word(a);
  for (const auto& a : shape.gpus > 0 ? without_gpus_flag(plan.argv) : plan.argv) o << " " << shell_word(a);
  o << "\nstatus=$?\necho \"$status\" > " << shell_word(plan.out_dir.string()) << "/slurm-\"$SLURM_JOB_ID\".exit\n"
    << "exit \"$status\"\n";
  return o.str();
}

}  // namespace gpt::harness::slurm
