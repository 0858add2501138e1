// What goes into a Slurm batch script is plain or quoted: a partition, account or QOS with a newline (which
// bash would run as a command) is refused naming its flag, and paths are quoted for sbatch and for bash.
#include <gtest/gtest.h>

#include "harness/record/slurm_launcher.h"
#include "base/check.h"

namespace gpt::harness::slurm {
namespace {

RunPlan plain_plan() {
  RunPlan plan;
  plan.seed = 1;
  plan.run_id = "sweep-seed1";
  plan.out_dir = "/results/runs/sweep/sweep-seed1";
  plan.argv = {"/bin/train_gpt", "--seed", "1"};
  return plan;
}

// The error batch_script throws, or "" when it writes a script.
std::string script_error(const RunPlan& plan, const SlurmSettings& settings) {
  try {
    (void)batch_script(plan, JobShape{0, std::nullopt}, settings);
  } catch (const gpt::Error& e) {
    return e.what();
  }
  return "";
}

TEST(SlurmScriptSafety, NewlineInPartitionIsRefusedNamingTheFlag) {
  SlurmSettings settings;
  settings.partition = "gpu\nid > /tmp/INJ";
  const std::string error = script_error(plain_plan(), settings);
  EXPECT_NE(error.find("--slurm-partition"), std::string::npos) << error;
  EXPECT_NE(error.find("expected a Slurm name"), std::string::npos) << error;
}

TEST(SlurmScriptSafety, AccountAndQosAreCheckedLikeThePartition) {
  SlurmSettings account;
  account.account = "lab;reboot";
  EXPECT_NE(script_error(plain_plan(), account).find("--slurm-account"), std::string::npos);
  SlurmSettings qos;
  qos.qos = "high\n#SBATCH --nodes=64";
  EXPECT_NE(script_error(plain_plan(), qos).find("--slurm-qos"), std::string::npos);
  SlurmSettings fine;
  fine.partition = "gpu,gpu-long";
  fine.account = "my_lab.2";
  fine.qos = "high-prio";
  EXPECT_EQ(script_error(plain_plan(), fine), "");
}

TEST(SlurmScriptSafety, RunIdWithANewlineIsRefused) {
  RunPlan plan = plain_plan();
  plan.run_id = "x\nid > /tmp/INJ\n";
  EXPECT_NE(script_error(plan, SlurmSettings{}).find("run id"), std::string::npos);
}

TEST(SlurmScriptSafety, OutputPathIsQuotedForSbatchAndControlCharactersRefused) {
  RunPlan plan = plain_plan();
  plan.out_dir = "/my results/\"q\"/sweep-seed1";
  const std::string script = batch_script(plan, JobShape{0, std::nullopt}, SlurmSettings{});
  EXPECT_NE(script.find("#SBATCH --output=\"/my results/\\\"q\\\"/sweep-seed1/slurm-%j.log\"\n"), std::string::npos)
      << script;
  plan.out_dir = "/results/a\nb";
  EXPECT_NE(script_error(plan, SlurmSettings{}).find("control character"), std::string::npos);
}

}  // namespace
}  // namespace gpt::harness::slurm
