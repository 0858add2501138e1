#pragma once
// The run summary the trainer writes to OUT/ID.json (ARCHITECTURE contract). Fields the harness reads:
//   schema_version, run_id, seed, recipe (string, or {"name", "hash"}), status, final_val_loss,
//   train_time_ms, steps, total_steps, tokens, train_data {cycled, passes}, val_history [{step, val_loss,
//   train_time_ms}], peak_memory_mib (or peak_memory {"allocated_mib", "reserved_mib"}), world_size, backend,
//   git_commit, environment {gpu, driver, cuda, nccl, cpu, compiler, build_flags, git_commit, git_dirty, hostname,
//   gpu_uuid, gpu_clocks, gpu_power_limit, threads}.
// Every field is optional: a foreign trainer may write none of them, and the log stays the fallback.
// A loss of null or a string "nan"/"inf" is read as NaN/inf (JSON has no NaN). The shared result checks
// (harness/store/run_checks.h) refuse the whole summary for a negative loss, a negative count or steps beyond
// total_steps.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/logparse/logparse.h"
#include "harness/store/store.h"

namespace gpt::harness {

struct RunSummary {
  std::optional<int> schema_version;
  std::string run_id;
  std::optional<std::int64_t> seed;
  std::string recipe;
  std::string recipe_hash;  // recipe.hash when the recipe is an object
  std::string status;       // "ok", "diverged", ... as the trainer wrote it
  std::optional<double> final_val_loss;
  std::optional<double> train_time_ms;
  std::optional<std::int64_t> steps;
  std::optional<std::int64_t> total_steps;
  std::optional<std::int64_t> tokens;
  bool train_data_cycled = false;                 // the trainer restarted its train shards (proxy corpora)
  std::optional<std::int64_t> train_data_passes;  // passes begun over the train shards
  std::vector<LogValPoint> val_history;
  std::optional<double> peak_memory_mib;
  std::optional<int> world_size;
  std::string backend;
  std::optional<Environment> environment;
  // Beside the environment row (kept as run params): the GPU's UUID, clocks and power limit, the CPU threads.
  std::string gpu_uuid, gpu_clocks, gpu_power_limit;
  std::optional<std::int64_t> threads;
};

// Parses the summary text; throws gpt::Error naming `source` when it is not JSON or a field has the wrong type.
RunSummary parse_run_summary(const std::string& text, const std::string& source);
RunSummary read_run_summary(const std::filesystem::path& path);

}  // namespace gpt::harness
