#pragma once
// The JSON documents of a run: the summary OUT/ID.json (trainer ↔ harness contract, schema version 1) and the
// metadata block of a checkpoint (checkpoint.h).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/data/corpus_fingerprint.h"
#include "trainer/data/train_loader.h"
#include "trainer/run/backend.h"
#include "trainer/run/run_log.h"
#include "trainer/run/training_run.h"
#include "trainer/run/training_state.h"

namespace gpt {

inline constexpr int kRunSummarySchemaVersion = 1;

struct RunSummary {
  std::string run_id;
  uint64_t seed = 0;
  std::string recipe_name, recipe_hash;
  RunResult result;
  PeakMemoryMib peak_memory;  // CPU: peak resident set size in both fields
  int world_size = 1;
  std::string backend;
  RunEnvironment environment;

  // Fields: schema_version, run_id, seed, recipe {name, hash}, status, error (when not finished),
  // final_val_loss (null when none), train_time_ms, steps, total_steps, tokens, train_data {cycled, passes},
  // val_history [{step, val_loss, train_time_ms}] (non-finite losses as null), stage_times [{stage, first_step,
  // steps, train_time_ms, ms_per_step}], peak_memory {allocated_mib, reserved_mib}, world_size, backend,
  // git_commit, git_dirty, environment {...}.
  nlohmann::json to_json() const;
};

// Written atomically (temporary file + rename).
void write_run_summary(const std::filesystem::path& path, const RunSummary& summary);

struct CheckpointMeta {
  std::string run_id;
  uint64_t seed = 0;
  std::string recipe_name, recipe_hash;
  int world_size = 1;
  int rank = 0;           // whose state the file holds (W > 1: one file per rank, training_run.h)
  int64_t next_step = 0;  // the step the resumed loop starts at
  LoaderPosition loader;
  double train_time_ms = 0;
  int64_t tokens = 0;
  std::vector<ValPoint> val_history;
  OptimizerCounters counters;
  std::optional<CorpusFingerprint> data;  // what it trained on; absent in checkpoints written before it was kept

  nlohmann::json to_json() const;
  // Throws gpt::Error naming `source` and the missing or mistyped field.
  static CheckpointMeta from_json(const nlohmann::json& j, const std::string& source);
};

}  // namespace gpt
