#pragma once
// What experiment a log is: imported runs are grouped into arms by what they ran, not by folder alone. A run's
// fingerprint is its step count (N of `step:s/N`: the schedule), the hash of the code its log starts with (the
// speedrun scripts print their own source before the first `=` separator line) and, for our trainer, the recipe
// hash of its OUT/ID.json. A folder whose runs differ is split into one arm per experiment, and the import says so.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpt::harness {

// SHA-1 of `bytes` as 40 hex digits.
std::string sha1_hex(std::string_view bytes);

// The hash of the source code a log starts with: the text before its first separator line (a line of `=` only),
// when that comes before the first step line; "" when the log has no such code dump.
std::string log_code_hash(std::string_view log_text);

struct ExperimentKey {
  std::string folder_arm;  // the arm its folder gives
  std::optional<std::int64_t> total_steps;
  std::string code_hash, recipe_hash;  // "" when unknown
  bool operator==(const ExperimentKey&) const = default;
};

struct ExperimentArms {
  std::vector<std::string> arms;   // per key, its arm: the folder arm, with " [...]" when the folder was split
  std::vector<std::string> notes;  // one per split folder: what it mixed and the arms it became
};

// Arm names for the runs with these keys (same order).
ExperimentArms experiment_arms(const std::vector<ExperimentKey>& keys);

}  // namespace gpt::harness
