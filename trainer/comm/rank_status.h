#pragma once
// How each rank of a `train_gpt --ranks N` launch ended, told by the rank itself. The launcher's own child is
// mpirun, whose exit status names neither the rank that failed nor how (it reports one code for the job), so the
// launcher names a folder in SPEEDRUN_RANK_STATUS_DIR and each rank leaves there
//   rankR.pid  its process id, when it starts (the launcher forwards SIGINT/SIGTERM to the ranks themselves:
//              mpirun would kill them before rank 0 writes the run's summary);
//   rankR.end  "CODE REASON" when it ends on its own (its exit code and why);
//   rankR.sig  the name of each SIGINT/SIGTERM it received (mpirun stopping the job after another rank died).
// A rank with a pid file but neither an end file nor a signal was killed (SIGKILL, the OOM killer) or crashed.
#include <signal.h>
#include <string.h>
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpt {

inline constexpr const char* kRankStatusDirVar = "SPEEDRUN_RANK_STATUS_DIR";

// "SIGTERM" for 15; "signal N" for a number without a name.
inline std::string signal_name(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

// Rank side: no-ops unless this process is a rank of a launch that set SPEEDRUN_RANK_STATUS_DIR. Errors while
// writing are ignored: the status is a diagnosis, never a reason for a run to fail.
// record_rank_start also notes each SIGINT/SIGTERM in rankR.sig before passing it to the handler installed before
// (the communicator's), so call it after the communicator exists.
void record_rank_start();
void record_rank_end(int exit_code, const std::string& reason);

// Launcher side.
struct RankEnd {
  int rank = 0;
  std::optional<pid_t> pid;      // from rankR.pid
  std::optional<int> exit_code;  // from rankR.end
  std::string reason;            // from rankR.end
  std::string signals;           // from rankR.sig: "SIGTERM", ...
};
std::vector<RankEnd> read_rank_ends(const std::filesystem::path& dir, int ranks);
// The process ids the ranks have recorded so far.
std::vector<pid_t> recorded_rank_pids(const std::filesystem::path& dir, int ranks);
// One sentence per rank that did not finish cleanly, e.g. "rank 1 ended without a status: killed by SIGKILL (the
// signal of mpirun's exit status 137) or crashed" or "rank 0 exited with code 1 (rank 0: ...)"; `mpirun_code` is
// the launcher's child's status (128 + s for a signal). Empty when every rank exited with 0.
std::string describe_rank_ends(const std::vector<RankEnd>& ends, int mpirun_code);

}  // namespace gpt
