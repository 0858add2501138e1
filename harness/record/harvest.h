#pragma once
// Turning a finished child process into a stored run: how it ended (exit code, signal, timeout,
// interruption), what its log says (harness/logparse) and what its OUT/ID.json summary says.
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "harness/launcher/process.h"
#include "harness/logparse/logparse.h"
#include "harness/store/store.h"

namespace gpt::harness {

// One run of a sweep, as planned before launch.
struct RunPlan {
  std::string arm;
  std::int64_t seed = 0;
  std::string run_id;
  std::filesystem::path out_dir;   // passed to the trainer as --out / {out}
  std::filesystem::path log_path;  // console output (stdout + stderr) of the child
  std::vector<std::string> argv;
  // The sweep's opt-in early-stop rule: a run ending on a validation at this step is complete.
  std::optional<std::int64_t> early_stop_step;
  // What the harness asked of this run (e.g. the arm's recipe), stored with it as run params.
  std::map<std::string, std::string> params;
};

enum class RunEnd { exited, timed_out, interrupted };

// The lock file of a run folder, held by its trainer and everything the trainer starts.
inline constexpr const char* kRunLockFileName = "run.lock";

// Gives a run folder to a new attempt of its run: every file an earlier attempt left there (or a sweep of the same
// name in another database beside this one) is removed but the lock and an unstored spool file, so that no summary,
// log, step line or environment of another run can be read back as this attempt's result. Call it only while the
// folder's lock is held (LaunchSpec::before_start) or no job of the run can still be running.
void empty_run_folder(const std::filesystem::path& out_dir);

// Builds the record of a finished run. Exit 0 with a final validation at the total step count (or at the
// sweep's declared early-stop step) is ok; exit 3 (or a nan/inf final loss) is diverged; a signal or
// another exit code is failed, and so is exit 0 from a run that wrote neither step lines nor a summary; exit 0
// without a final result is incomplete. The reason names what went wrong and quotes the last line of output. The
// trainer's OUT/ID.json adds provenance: its environment (commit, GPU) and the run params recipe_hash, world_size,
// backend, and gpu_uuid, gpu_clocks, gpu_power_limit, threads where it reports them.
RunRecord harvest_run(const RunPlan& plan, const ExitInfo& exit, RunEnd end, std::optional<double> timeout_s = {});

// A run read from an existing log file (import): status from the parsed log alone.
RunRecord record_from_log(const ParsedLog& log, const std::filesystem::path& log_path);

// Adds what an OUT/ID.json summary says to `run`: values it holds replace the log's, the trainer's
// environment and the params recipe_hash, world_size, backend are kept as provenance. A final val loss
// counts only when the summary's steps reach its total_steps (or `early_stop_step`).
void apply_run_summary(RunRecord& run, const struct RunSummary& summary,
                       std::optional<std::int64_t> early_stop_step = std::nullopt);

// Where the trainer's summary contradicts the log of the same run, or nullopt: a summary of another run (its
// run_id is not `run_id`), another total step count, a diverged status or non-finite final loss beside a log that
// ends with a final validation, or a final loss that does not round to the log's printed one. The run is then
// stored `failed` with this reason (record and import alike).
std::optional<std::string> summary_log_conflict(const ParsedLog& log, const struct RunSummary& summary,
                                                const std::string& run_id);

// The last non-empty line of a file (at most `max_chars`), for error messages.
std::string last_output_line(const std::filesystem::path& path, std::size_t max_chars = 160);

}  // namespace gpt::harness
