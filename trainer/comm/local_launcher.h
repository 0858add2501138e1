#pragma once
// `train_gpt --gpus N` behaves like `torchrun --nproc_per_node N train_gpt ...`: the process re-runs its own binary
// N times (argv without --gpus), each child with RANK = LOCAL_RANK = i, WORLD_SIZE = LOCAL_WORLD_SIZE = N,
// CUDA_VISIBLE_DEVICES = its own GPU (the parent's i-th entry when the parent restricts the devices, else i),
// NCCL_NVLS_ENABLE=0 (NVLink multicast stays off on shared hosts) and SPEEDRUN_RENDEZVOUS_DIR = a fresh directory
// the launcher creates and removes (comm_factory.h reads them).
//
// The parent forwards SIGINT and SIGTERM to the children and waits for all of them. When a child fails (non-zero
// exit or killed by a signal), the others get `grace` to finish on their own (NCCL peers of a dead rank usually
// fail or hang), then SIGTERM, then SIGKILL after `kill_after`. The result is the worst (largest) exit code of the
// children that ended on their own (a signal s counts as 128 + s); children the launcher stopped after a sibling's
// failure do not count, so the code names the first cause. Children die with the parent (PR_SET_PDEATHSIG).
//
// Signals arrive through sigtimedwait with SIGINT/SIGTERM/SIGCHLD blocked in the calling thread: call this before
// the process starts other threads, or block those signals in them (a thread that does not block SIGINT would
// receive Ctrl-C itself).
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

namespace gpt {

struct LocalLaunch {
  std::filesystem::path executable;  // run as is (no PATH search)
  std::vector<std::string> args;     // every child's argv, args[0] included
  int processes = 1;
  std::chrono::milliseconds grace{std::chrono::seconds(15)};
  std::chrono::milliseconds kill_after{std::chrono::seconds(10)};
  std::filesystem::path rendezvous_parent;  // where the rendezvous directory is made; empty: the temp directory
  std::ostream* log = nullptr;              // one line per failure and per forwarded signal, when set
  bool plain_environment = false;           // children get the parent's environment as is (a launcher such as mpirun)
  std::vector<std::string> extra_environment;  // NAME=VALUE added to every child's environment
  std::string child_name;                      // how the log names a child (e.g. "mpirun"); empty: "rank R"
  // Where a SIGINT/SIGTERM to the launcher goes: these processes (e.g. the ranks mpirun started) when the function
  // is set and returns any, else the children.
  std::function<std::vector<pid_t>()> signal_targets;
};

struct LaunchOutcome {
  int exit_code = 0;                // the worst code of the children that ended on their own
  std::vector<int> child_codes;     // per rank: exit code, or 128 + signal
  std::vector<bool> stopped_by_us;  // per rank: terminated by the launcher after another rank failed
  int interrupted_by = 0;           // the SIGINT/SIGTERM the launcher received and forwarded, 0 if none
};

// Spawns, supervises and reaps the children; throws gpt::Error when the executable cannot be run or the
// parent's CUDA_VISIBLE_DEVICES lists fewer devices than processes (then no child is left running).
LaunchOutcome run_local_processes(const LocalLaunch& launch);

// argv without `--gpus N` / `--gpus=N` (every occurrence).
std::vector<std::string> args_without_gpus_flag(std::span<char* const> argv);

// The environment of child `rank`: `parent` (NAME=VALUE entries) minus the variables the launcher owns, plus its
// own. Throws when the parent's CUDA_VISIBLE_DEVICES has fewer than `world_size` entries.
std::vector<std::string> child_environment(const std::vector<std::string>& parent, int rank, int world_size,
                                           const std::filesystem::path& rendezvous_dir);

// For main: `train_gpt --gpus N` with N > 1 calls this first and returns its result as the exit status. Re-runs
// /proc/self/exe with argv minus --gpus; refuses (gpt::Error) to run inside an already launched rank (RANK or
// WORLD_SIZE set) so that a rank never launches ranks of its own.
int launch_local_ranks(int gpus, int argc, char** argv);

// argv without every occurrence of `--FLAG N` / `--FLAG=N`.
std::vector<std::string> args_without_flag(std::span<char* const> argv, const std::string& flag);

// The exit status of the run from the MPI launcher's: the trainer's own codes (0 finished, 1 failed, 2 bad input,
// 3 diverged) pass through; anything else (a rank killed by a signal: mpirun reports 128 + s) is a failure, 1.
int run_status_from_mpirun(int mpirun_code);

// The mpirun command line of `train_gpt --ranks N`: [--allow-run-as-root when root] --oversubscribe --bind-to none
// -np N executable args... (the ranks are CPU processes of one machine; their OpenMP threads must not be pinned
// to one core each).
std::vector<std::string> mpirun_command(const std::string& mpirun, int ranks, const std::filesystem::path& executable,
                                        const std::vector<std::string>& args, bool as_root);

// For main: `train_gpt --ranks N --backend cpu` with N > 1 runs its own binary (argv minus --ranks) under mpirun
// (found on PATH, or SPEEDRUN_MPIRUN) and returns run_status_from_mpirun. A SIGINT/SIGTERM goes to the ranks
// themselves (rank_status.h), so that they end through their failure path and rank 0 writes the summary; the
// launcher then waits for them and returns 128 + the signal. When the run fails, one line names each rank that
// did not finish and how it ended, from what the ranks left. Refuses (gpt::Error) inside an already launched
// rank, or when mpirun is missing.
int launch_mpi_ranks(int ranks, int argc, char** argv);

}  // namespace gpt
