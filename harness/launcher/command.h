#pragma once
// Short-lived helper programs the harness waits for (git, cmake, ctest, Slurm's client tools, benchmark programs,
// `train_gpt --print-recipe`), run through Process: their own process group, a parent-death signal, and a stated
// time limit after which the whole group is killed and the command is named in a CommandTimedOut error.
// Output goes to a log file, or is captured when there is none.
#include <filesystem>
#include <string>
#include <vector>

#include "base/check.h"
#include "harness/launcher/process.h"

namespace gpt::harness {

// The limit of helper commands that answer within seconds (git rev-parse, ctest --show-only, Slurm's client tools,
// train_gpt --print-recipe): one still running after this is hung, not slow.
inline constexpr double kQuickCommandTimeoutS = 120;
// The default limit of a build (compare's and nightly's --build-timeout).
inline constexpr double kDefaultBuildTimeoutS = 7200;

struct CommandSpec {
  std::vector<std::string> argv;      // argv[0] is looked up in PATH unless it contains a '/'
  double timeout_s = 0;               // > 0: every command the harness waits for has a limit
  std::string timeout_source;         // the option that set timeout_s, named in the error; empty: a built-in limit
  std::filesystem::path working_dir;  // empty: ours
  std::filesystem::path log_path;     // stdout and stderr appended here; empty: both captured into the result
  bool truncate_log = false;          // start log_path afresh
};

struct CommandResult {
  ExitInfo exit;
  std::string out, err;  // captured output (empty when the command had a log file)
  bool succeeded() const { return exit.exited && exit.exit_code == 0; }
  int status() const { return exit.exited ? exit.exit_code : 128 + exit.signal; }  // shell convention
};

// The command ran past its time limit; its process group was killed. The message names the command, the limit
// (and the option that set it) and the log.
class CommandTimedOut : public gpt::Error {
 public:
  using gpt::Error::Error;
};

// Waits for `process` for at most `timeout_s` seconds from its start (<= 0: no limit); past it the process group
// gets SIGTERM, then SIGKILL after `grace`. Returns the exit, and whether the limit was what ended it.
struct WaitResult {
  ExitInfo exit;
  bool timed_out = false;
};
WaitResult wait_with_timeout(Process& process, double timeout_s,
                             std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

// Runs the command to its end. Throws gpt::Error when it cannot be started and CommandTimedOut when it runs past
// its limit; a non-zero exit is returned, not thrown.
CommandResult run_command(const CommandSpec& spec);

// Runs argv (in `working_dir` when given) and returns its stdout without trailing newlines; throws gpt::Error
// naming the command, its exit status and the first line of its stderr when it does not exit 0.
std::string capture_stdout(const std::vector<std::string>& argv, double timeout_s,
                           const std::filesystem::path& working_dir = {});

// argv joined for logs, errors and the sweep record (arguments with spaces are quoted).
std::string join_command(const std::vector<std::string>& argv);

// "2 s", "0.5 s": a limit as the user gave it.
std::string format_seconds(double seconds);

}  // namespace gpt::harness
