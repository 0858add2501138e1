#include "trainer/comm/launch_env.h"

#include <map>

#include <gtest/gtest.h>

#include "base/check.h"

namespace gpt {
namespace {

LaunchEnv detect(const std::map<std::string, std::string>& vars) {
  return detect_launch_env([&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

TEST(LaunchEnv, NoLauncherIsOneRank) {
  const LaunchEnv env = detect({});
  EXPECT_EQ(env.rank, 0);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.source, "none");
  EXPECT_TRUE(env.is_master());
}

TEST(LaunchEnv, Torchrun) {
  const LaunchEnv env = detect({{"RANK", "5"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}});
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.source, "torchrun");
  EXPECT_FALSE(env.is_master());
}

TEST(LaunchEnv, SlurmWithoutLocalIdUsesRank) {
  const LaunchEnv env = detect({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "4"}});
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 3);
  EXPECT_EQ(env.source, "slurm");
}

TEST(LaunchEnv, OpenMpi) {
  const LaunchEnv env =
      detect({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.source, "mpi");
}

TEST(LaunchEnv, TorchrunTakesPrecedenceOverSlurm) {
  const LaunchEnv env = detect({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(env.source, "torchrun");
  EXPECT_EQ(env.rank, 1);
}

TEST(LaunchEnv, RejectsBadValues) {
  EXPECT_THROW(detect({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), Error);
  EXPECT_THROW(detect({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}), Error);
  EXPECT_THROW(detect({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), Error);
  EXPECT_THROW(detect({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), Error);
  EXPECT_THROW(detect({{"RANK", "1 "}, {"WORLD_SIZE", "2"}}), Error);
}

TEST(LaunchEnv, RejectsHalfSetLauncher) {
  try {
    detect({{"SLURM_PROCID", "0"}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SLURM_NTASKS"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt
