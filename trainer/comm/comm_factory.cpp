#include "trainer/comm/comm_factory.h"

#include <cstdlib>
#include <span>

#include "base/check.h"
#include "trainer/comm/mpi_comm.h"
#include "trainer/comm/rendezvous.h"

#ifdef SPEEDRUN_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#endif
#ifdef SPEEDRUN_HAVE_NCCL
#include "trainer/comm/nccl_comm.h"
#endif

namespace gpt {

int local_device_index(const LaunchEnv& launch, int visible) {
  GPT_CHECK(visible >= 1, "no CUDA device visible to rank ", launch.rank, " (check CUDA_VISIBLE_DEVICES)");
  if (visible == 1) return 0;
  GPT_CHECK(launch.local_rank < visible, "local rank ", launch.local_rank, " (", launch.source,
            ") has no CUDA device: ", visible, " are visible; launch at most one rank per GPU on each node");
  return launch.local_rank;
}

bool started_by_mpi_launcher(const EnvLookup& getenv) {
  return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

bool nccl_id_through_mpi(const LaunchEnv& launch, const EnvLookup& getenv) {
  return mpi_available() && !getenv(kRendezvousDirVar) && started_by_mpi_launcher(getenv);
}

std::unique_ptr<Comm> make_comm(const LaunchEnv& launch, Device backend, const EnvLookup& getenv) {
  GPT_CHECK(launch.world_size >= 1 && launch.rank >= 0 && launch.rank < launch.world_size, "launch environment: rank ",
            launch.rank, " outside world size ", launch.world_size);
  if (backend == Device::cpu) {
    if (launch.world_size == 1) return make_single_rank_comm();
    GPT_CHECK(started_by_mpi_launcher(getenv), "world size ", launch.world_size, " (from ", launch.source,
              ") on the CPU backend needs MPI between the ranks, but no MPI launcher started this process: use "
              "train_gpt --ranks N, mpirun -np N or srun --mpi=pmix");
    return make_mpi_comm(launch.world_size, collective_timeout_from_env());
  }
#ifdef SPEEDRUN_HAVE_CUDA
  int visible = 0;
  GPT_CUDA_CHECK(cudaGetDeviceCount(&visible));
  GPT_CUDA_CHECK(cudaSetDevice(local_device_index(launch, visible)));
  if (launch.world_size == 1) return make_single_rank_comm();
#ifdef SPEEDRUN_HAVE_NCCL
  ncclUniqueId id;
  if (nccl_id_through_mpi(launch, getenv)) {
    if (launch.rank == 0) id = new_nccl_id();
    mpi_broadcast_bytes(std::as_writable_bytes(std::span(id.internal)), 0, launch.world_size);
  } else {
    id = exchange_nccl_id(launch.rank, launch.world_size, rendezvous_from_env(getenv));
  }
  return std::make_unique<NcclComm>(launch.rank, launch.world_size, id, collective_timeout_from_env());
#else
  GPT_FAIL("world size ", launch.world_size,
           " needs NCCL, but this build found none (see NCCL_ROOT in "
           "cmake/nccl_comm.cmake)");
#endif
#else
  GPT_FAIL(
      "--backend cuda: this build has no CUDA backend (nvcc was not found "
      "at configure time)");
#endif
}

std::unique_ptr<Comm> make_comm_from_env(Device backend) {
  return make_comm(detect_launch_env(), backend, [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace gpt
