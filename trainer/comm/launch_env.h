#pragma once
// Where this process sits in a multi-process launch (RECIPE §8): rank, world size and local rank, read from the
// launcher's environment. torchrun-style RANK/WORLD_SIZE/LOCAL_RANK take precedence, then Slurm
// (SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID), then Open MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK); with none of
// them the process is a single rank.
#include <functional>
#include <optional>
#include <string>

namespace gpt {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string source = "none";  // "torchrun", "slurm", "mpi" or "none"

  bool is_master() const { return rank == 0; }
};

// Reads variables through `getenv` (tests pass a map lookup). Throws gpt::Error naming the variable when a value
// is not an integer, the rank is outside [0, world size), or a launcher sets only part of its variables.
LaunchEnv detect_launch_env(const std::function<std::optional<std::string>(const std::string&)>& getenv);
LaunchEnv detect_launch_env();  // from the process environment

}  // namespace gpt
