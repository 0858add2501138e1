#pragma once
// Parsing of speedrun-format training logs (ARCHITECTURE "Log lines"), as printed by our trainer, the
// PyTorch speedrun scripts and their many variants:
//   step:{s}/{S} val_loss:{x} train_time:{ms}ms step_avg:{a}ms
//   step:{s}/{S} train_time:{ms}ms step_avg:{a}ms          (optionally train_loss:{x})
//   peak memory allocated: {n} MiB reserved: {m} MiB
// Tolerated: a leading source-code dump and `=` separator lines, losses with any number of decimals,
// extra key:value fields anywhere in a step line, times in seconds (`train_time:12.345s`, track 3),
// `step_avg:nanms`, several runs in one file, and a file that ends mid-line (that line counts only when it was cut
// inside its step_avg field, after the loss and the time are whole).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpt::harness {

struct LogValPoint {
  std::int64_t step = 0;
  double val_loss = 0;
  std::optional<double> train_time_ms;
  int val_loss_decimals = -1;  // decimals the log printed (a summary's exact loss must round to it); -1: unknown
};

// One step line, split into its fields.
struct StepLine {
  std::int64_t step = 0;
  std::int64_t total = 0;
  std::optional<double> val_loss;  // present on validation lines
  int val_loss_decimals = 0;       // digits after its decimal point
  std::optional<double> train_loss;
  std::optional<double> train_time_ms;  // `ms` and `s` suffixes both normalised to milliseconds
  bool time_in_seconds = false;
  // Why this step line cannot be read as the trainer meant it (a step beyond its total, a total of 0, a loss or
  // time that is no number: 1e309, 3,2771, 0x1p1); empty when it reads. A log with such a line is `failed`
  // with this reason rather than taken for a log without step lines or without a final validation.
  std::string problem;
};

// Parses one line as a step line; nullopt when it is not one (source code, headers, other output). A step
// line consists only of whitespace-separated `key:value` fields, one of them `step:<int>/<int>`.
std::optional<StepLine> parse_step_line(std::string_view line);

// Parses `peak memory allocated: N MiB reserved: M MiB`; returns {allocated, reserved} in MiB.
std::optional<std::pair<double, double>> parse_peak_memory_line(std::string_view line);

// invalid: the log contradicts itself or holds an impossible result (a negative val loss, two different final
// validations); the run is stored `failed` with the reason.
enum class LogOutcome { complete, diverged, incomplete, invalid };

struct ParsedLog {
  LogOutcome outcome = LogOutcome::incomplete;
  std::string reason;  // why it is incomplete or diverged (empty when complete)
  std::optional<double> final_val_loss;
  int final_val_loss_decimals = -1;  // decimals the log printed it with
  std::optional<double> final_train_time_ms;
  std::optional<std::int64_t> final_step;  // step of the final result, or the last step seen
  std::optional<std::int64_t> last_step;   // the last step line's step (reports show it)
  std::optional<std::int64_t> total_steps;
  std::vector<LogValPoint> val_points;
  std::optional<double> peak_memory_mib;
  std::optional<double> reserved_memory_mib;
  std::optional<double> last_train_loss;
  bool time_in_seconds = false;  // the run printed train_time in seconds (track 3)
  std::size_t step_lines = 0;
  std::size_t first_line = 0, last_line = 0;  // 1-based line numbers of the run's first and last step lines
};

// What counts as a run's final result. By default only a validation at the total step count (N of
// `step:s/N`): a log cut short after an intermediate validation is incomplete, never a result. A sweep may
// opt into a fixed early stop: a validation at `early_stop_step` (when the run stops there) is final too.
struct LogParseOptions {
  std::optional<std::int64_t> early_stop_step;
};

// Splits a log into runs (a new run starts where the step count goes backwards, the total changes, or a
// `=` separator line follows step lines) and parses each. A log without any step line gives one
// incomplete run whose reason says so. A `diverged: ...` line (the trainer's) marks the run diverged.
std::vector<ParsedLog> parse_log(std::string_view text, const LogParseOptions& options = {});

// parse_log on a file's contents; throws gpt::Error naming the file if it cannot be read.
std::vector<ParsedLog> parse_log_file(const std::filesystem::path& path, const LogParseOptions& options = {});

}  // namespace gpt::harness
