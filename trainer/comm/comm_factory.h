#pragma once
// The communicator of a run, from where the process sits in its launch
// (trainer/run/launch_env.h):
//  - W = 1: the single-rank communicator (either backend; no NCCL start-up);
//  - W > 1 on the CUDA backend: first the process's GPU is made current (device
//  0 when one device is visible,
//    as under `train_gpt --gpus N`, which gives every rank its own
//    CUDA_VISIBLE_DEVICES; else LOCAL_RANK, as under torchrun or srun), then an
//    NcclComm whose unique id travels through SPEEDRUN_RENDEZVOUS_DIR
//    (rendezvous.h);
//  - W > 1 on the CPU backend: an error (thread ranks exist only inside one
//  process, for tests).
// Call it before anything allocates on the GPU, so that every allocation lands
// on the selected device.
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "kernels/tensor.h"
#include "trainer/comm/comm.h"
#include "trainer/run/launch_env.h"

namespace gpt {

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

std::unique_ptr<Comm> make_comm(const LaunchEnv& launch, Device backend, const EnvLookup& getenv);

// detect_launch_env() and the process environment.
std::unique_ptr<Comm> make_comm_from_env(Device backend);

// The CUDA device index this rank uses among the `visible` devices (throws when
// LOCAL_RANK has none).
int local_device_index(const LaunchEnv& launch, int visible);

}  // namespace gpt
