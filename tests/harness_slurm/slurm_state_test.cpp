// The Slurm launcher's pure parts: parsing scontrol/sacct output, mapping end states to run statuses, the
// batch script, and the launcher settings a --resume reads back.
#include <gtest/gtest.h>

#include "harness/record/slurm_launcher.h"
#include "harness/launcher/slurm_util.h"
#include "base/check.h"

namespace gpt::harness::slurm {
namespace {

TEST(SlurmParse, ScontrolOneLinePerJob) {
  const std::string text =
      "JobId=12 JobName=sweep UserId=root(0) JobState=RUNNING Reason=None Dependency=(null) ExitCode=0:0 "
      "RunTime=00:00:03\n"
      "JobId=13 JobName=sweep JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0\n"
      "JobId=14 JobName=sweep JobState=CANCELLED Reason=None ExitCode=0:15\n"
      "No jobs in the system\n";
  const auto jobs = parse_scontrol(text);
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].job_id, "12");
  EXPECT_EQ(jobs[0].state, "RUNNING");
  EXPECT_EQ(jobs[1].exit_code, 3);
  EXPECT_EQ(jobs[1].reason, "NonZeroExitCode");
  EXPECT_EQ(jobs[2].signal, 15);
  EXPECT_TRUE(parse_scontrol("").empty());
}

TEST(SlurmParse, SacctPipeSeparated) {
  const auto jobs = parse_sacct("20|CANCELLED by 0|0:15\n21|NODE_FAIL|1:0\n\n22|COMPLETED|0:0\n");
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs[0].state, "CANCELLED");
  EXPECT_EQ(jobs[0].signal, 15);
  EXPECT_EQ(jobs[1].state, "NODE_FAIL");
  EXPECT_EQ(jobs[2].exit_code, 0);
}

TEST(SlurmStates, ActiveAndFinal) {
  for (const char* s : {"PENDING", "RUNNING", "COMPLETING", "REQUEUED", "SUSPENDED", "CONFIGURING"}) {
    EXPECT_TRUE(is_active(s)) << s;
  }
  for (const char* s : {"COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY"}) {
    EXPECT_FALSE(is_active(s)) << s;
  }
}

TEST(SlurmStates, MapToRunEnds) {
  const auto completed = outcome_of({"1", "COMPLETED", 0, 0, ""});
  EXPECT_EQ(completed.end, RunEnd::exited);
  EXPECT_TRUE(completed.exit.exited);
  EXPECT_FALSE(completed.forced_status);
  EXPECT_TRUE(completed.note.empty());

  const auto diverged = outcome_of({"2", "FAILED", 3, 0, ""});
  EXPECT_EQ(diverged.exit.exit_code, 3);  // harvest_run turns exit 3 into `diverged`

  const auto timeout = outcome_of({"3", "TIMEOUT", 0, 15, ""});
  EXPECT_EQ(timeout.end, RunEnd::timed_out);

  const auto cancelled = outcome_of({"4", "CANCELLED", 0, 15, ""});
  EXPECT_EQ(cancelled.end, RunEnd::interrupted);  // stored as killed: --resume runs it again
  EXPECT_FALSE(cancelled.preempted);
  EXPECT_NE(cancelled.note.find("CANCELLED"), std::string::npos);

  const auto preempted = outcome_of({"5", "PREEMPTED", 0, 0, ""});
  EXPECT_EQ(preempted.end, RunEnd::interrupted);
  EXPECT_TRUE(preempted.preempted);

  for (const char* s : {"NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "LOST"}) {
    const auto failed = outcome_of({"6", s, 0, 0, ""});
    ASSERT_TRUE(failed.forced_status) << s;
    EXPECT_EQ(*failed.forced_status, RunStatus::failed) << s;
    EXPECT_NE(failed.note.find(s), std::string::npos) << failed.note;
  }
}

TEST(SlurmScript, OneTaskPerGpuWithoutTheGpusFlag) {
  RunPlan plan;
  plan.seed = 7;
  plan.run_id = "sweep-seed7";
  plan.out_dir = "/results/runs/sweep/sweep-seed7";
  plan.argv = {"/bin/train_gpt", "--recipe", "record", "--seed", "7", "--gpus", "8", "--out", "/o dir"};
  SlurmSettings settings;
  settings.partition = "gpu";
  settings.account = "lab";
  settings.qos = "high";
  settings.srun_args = {"--cpu-bind=cores"};
  const std::string script = batch_script(plan, JobShape{8, 60}, settings);
  EXPECT_NE(script.find("#SBATCH --ntasks=8\n#SBATCH --gpus-per-task=1\n"), std::string::npos) << script;
  EXPECT_NE(script.find("#SBATCH --time=60\n"), std::string::npos);
  EXPECT_NE(script.find("#SBATCH --partition=gpu\n#SBATCH --account=lab\n#SBATCH --qos=high\n"), std::string::npos);
  EXPECT_NE(script.find("#SBATCH --output=/results/runs/sweep/sweep-seed7/slurm-%j.log"), std::string::npos);
  EXPECT_NE(script.find("srun --cpu-bind=cores /bin/train_gpt --recipe record --seed 7 --out '/o dir'\n"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("slurm-\"$SLURM_JOB_ID\".exit"), std::string::npos);

  const std::string cpu = batch_script(plan, JobShape{0, std::nullopt}, SlurmSettings{});
  EXPECT_NE(cpu.find("#SBATCH --ntasks=1\n"), std::string::npos);
  EXPECT_EQ(cpu.find("--gpus-per-task"), std::string::npos);
  EXPECT_EQ(cpu.find("--time"), std::string::npos);
  EXPECT_NE(cpu.find("--gpus 8"), std::string::npos);  // without GPUs the command is left alone
}

TEST(SlurmScript, StripsBothSpellingsOfTheGpusFlag) {
  EXPECT_EQ(without_gpus_flag({"t", "--gpus", "2", "--seed", "1"}), (std::vector<std::string>{"t", "--seed", "1"}));
  EXPECT_EQ(without_gpus_flag({"t", "--gpus=2"}), (std::vector<std::string>{"t"}));
  EXPECT_EQ(without_gpus_flag({"t", "--gpus"}), (std::vector<std::string>{"t", "--gpus"}));  // dangling: leave it
}

TEST(SlurmUtil, ShellWordsAndCommands) {
  EXPECT_EQ(shell_word("plain-word_1.0"), "plain-word_1.0");
  EXPECT_EQ(shell_word("two words"), "'two words'");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_word(""), "''");
  const auto r = run_command({"sh", "-c", "echo out; echo err >&2; exit 4"});
  EXPECT_EQ(r.status, 4);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err");
  EXPECT_THROW(run_command({"/nonexistent/sbatch"}), gpt::Error);
}

TEST(SlurmUtil, DefaultTimeBudgets) {
  EXPECT_EQ(default_time_minutes("tiny"), 15);
  EXPECT_GE(default_time_minutes("record"), 30);
}

}  // namespace
}  // namespace gpt::harness::slurm
