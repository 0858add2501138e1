#pragma once
// The export behind `scripts/reference-check`: for a recipe, data folder and seed, writes into a folder what an
// independent implementation needs to recompute our numbers (our seeded initial weights, one real training
// microbatch and one validation window with the schedule arguments of a step) and our results for them (training
// loss, every gradient, the per-position validation loss, the weights after one even and one odd optimizer step).
//
// Layout of OUT: manifest.json plus one raw little-endian file per tensor (f32, bf16 as its 16 bits, i32, i64),
// each named in the manifest with its shape, dtype, byte count and the reference state-dict name it maps to.
// The run is built by TrainingRun's own constructor (recipe, data, model, optimizer, loaders), with FP8 off.
#include <cstdint>
#include <filesystem>
#include <vector>

#include "trainer/run/training_run.h"

namespace gpt {

struct ReferenceExportOptions {
  RunOptions run;                     // recipe, overrides, data, seed, backend; out_dir = the export folder
  std::vector<int64_t> steps;         // even steps s: the pair (s, s + 1) runs with s's microbatch; empty: default
  int64_t validation_tokens = 8192;   // leading positions of validation window 0 (causal: losses are unchanged)
};

// Two even steps in different stages: 0 and the first even step of stage 1 (the first window change).
std::vector<int64_t> default_reference_steps(const Schedule& schedule);

// Checks the options against the recipe (throws gpt::Error naming the flag), writes OUT/manifest.json and the
// tensor files, and returns the manifest's path.
std::filesystem::path write_reference_export(ReferenceExportOptions options);

// The reference state-dict name of one of our §2.2 parameters (or buffers), e.g. embed -> embed.weight.
std::string reference_state_name(const std::string& ours);

}  // namespace gpt
