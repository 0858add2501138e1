// The run's communicator from the launch environment (CPU build: single rank, errors for what needs CUDA/NCCL).
#include "trainer/comm/comm_factory.h"

#include <map>

#include <gtest/gtest.h>

#include "base/check.h"
#include "trainer/comm/mpi_comm.h"

namespace gpt {
namespace {

std::optional<std::string> no_env(const std::string&) { return std::nullopt; }

LaunchEnv launch(int rank, int world, int local) {
  LaunchEnv env;
  env.rank = rank;
  env.world_size = world;
  env.local_rank = local;
  env.source = "torchrun";
  return env;
}

TEST(CommFactory, CpuSingleRank) {
  auto comm = make_comm(LaunchEnv{}, Device::cpu, no_env);
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->world_size(), 1);
  Tensor t = Tensor::from_doubles(std::vector<double>{1, 2}, {2}, DType::f32);
  comm->all_reduce(t, ReduceOp::sum);
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{1, 2}));
}

TEST(CommFactory, CpuRanksNeedAnMpiLauncher) {
  try {
    make_comm(launch(1, 2, 1), Device::cpu, no_env);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("train_gpt --ranks N, mpirun -np N"), std::string::npos) << e.what();
  }
}

TEST(CommFactory, NcclIdTravelsThroughMpiOnlyUnderAnMpiLauncher) {
  const auto env_of = [](std::map<std::string, std::string> vars) {
    return [vars](const std::string& name) -> std::optional<std::string> {
      const auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  };
  EXPECT_TRUE(started_by_mpi_launcher(env_of({{"OMPI_COMM_WORLD_SIZE", "2"}})));
  EXPECT_TRUE(started_by_mpi_launcher(env_of({{"PMIX_RANK", "0"}})));
  EXPECT_FALSE(started_by_mpi_launcher(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}})));
  EXPECT_EQ(nccl_id_through_mpi(launch(0, 2, 0), env_of({{"OMPI_COMM_WORLD_SIZE", "2"}})), mpi_available());
  EXPECT_FALSE(nccl_id_through_mpi(launch(0, 2, 0),
                                   env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"SPEEDRUN_RENDEZVOUS_DIR", "/tmp/x"}})));
  EXPECT_FALSE(nccl_id_through_mpi(launch(0, 2, 0), env_of({{"RANK", "0"}})));
}

TEST(CommFactory, RejectsInconsistentLaunch) { EXPECT_THROW(make_comm(launch(2, 2, 0), Device::cpu, no_env), Error); }

#ifndef SPEEDRUN_HAVE_CUDA
TEST(CommFactory, CudaBackendNeedsACudaBuild) {
  try {
    make_comm(LaunchEnv{}, Device::cuda, no_env);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA backend"), std::string::npos) << e.what();
  }
}
#endif

TEST(CommFactory, LocalDeviceIndex) {
  EXPECT_EQ(local_device_index(launch(5, 8, 5), 1), 0);  // --gpus N: one visible device per rank
  EXPECT_EQ(local_device_index(launch(5, 8, 5), 8), 5);  // torchrun/srun: all devices visible
  EXPECT_EQ(local_device_index(launch(3, 16, 3), 4), 3);
  EXPECT_THROW(local_device_index(launch(3, 4, 3), 2), Error);
  EXPECT_THROW(local_device_index(launch(0, 1, 0), 0), Error);
}

}  // namespace
}  // namespace gpt
