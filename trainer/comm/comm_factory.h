#pragma once
// The communicator of a run, from where the process sits in its launch (trainer/comm/launch_env.h):
//  - W = 1: the single-rank communicator (either backend; no NCCL start-up);
//  - W > 1 on the CUDA backend: first the process's GPU is made current (device 0 when one device is visible, as
//    under `train_gpt --gpus N`, which gives every rank its own CUDA_VISIBLE_DEVICES; else LOCAL_RANK, as under
//    torchrun, srun or mpirun), then an NcclComm whose unique id travels through MPI when mpirun or srun started
//    the ranks, else through SPEEDRUN_RENDEZVOUS_DIR (rendezvous.h). NCCL itself refuses two ranks on one GPU.
//  - W > 1 on the CPU backend: the MPI communicator (mpi_comm.h; mpirun, srun or `train_gpt --ranks N`).
// Call it before anything allocates on the GPU, so that every allocation lands on the selected device.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kernels/tensor.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/launch_env.h"

namespace gpt {

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

std::unique_ptr<Comm> make_comm(const LaunchEnv& launch, Device backend, const EnvLookup& getenv);

// detect_launch_env() and the process environment.
std::unique_ptr<Comm> make_comm_from_env(Device backend);

// Whether an MPI launcher (mpirun: OMPI_COMM_WORLD_SIZE; srun or others with PMIx/PMI: PMIX_RANK, PMI_RANK)
// started this process, so that MPI_Init joins the other ranks.
bool started_by_mpi_launcher(const EnvLookup& getenv);

// Whether the NCCL unique id travels through MPI (ranks started by an MPI launcher, this build has MPI, and no
// SPEEDRUN_RENDEZVOUS_DIR asks for the file rendezvous) rather than through the rendezvous directory.
bool nccl_id_through_mpi(const LaunchEnv& launch, const EnvLookup& getenv);

// The CUDA device index this rank uses among the `visible` devices (throws when
// LOCAL_RANK has none).
int local_device_index(const LaunchEnv& launch, int visible);

}  // namespace gpt
