#pragma once
// The export behind `scripts/reference-check`: for a recipe, data folder and seed, writes into a folder what an
// independent implementation needs to recompute our numbers and our results for them. Per step pair (s even, s + 1):
// the starting weights (our seeded initial weights, or a run's checkpoint: trained weights on which every §2
// feature is live), one validation window, and M real training microbatches (the first M slices of the loader's calls
// for s's stage); per microbatch our training loss (FP8 off, and with the §7.1 FP8 lm_head loss), every gradient
// of the even step and what the odd step's optimizer reads, and the weights after one even and one odd optimizer
// step from a fresh optimizer state. M ≥ 3 lets the check
// set each tolerance from the spread of several draws.
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
  RunOptions run;                    // recipe, overrides, data, seed, backend; out_dir = the export folder
  std::vector<int64_t> steps;        // even steps s of pairs from the initial weights; empty: the default
                                     // pairs, or none when a checkpoint gives the pair
  int64_t validation_tokens = 8192;  // leading positions of validation window 0 (causal: losses are unchanged)
  int64_t microbatches = 3;          // training microbatches per pair (each its own draw of every comparison)
  // A checkpoint of a run of the same recipe (train_gpt --set debug.stop_after_step=K writes one): adds the pair
  // (K, K + 1) started from its parameters and buffers, with a fresh optimizer state, on the loader's data at K.
  std::filesystem::path checkpoint;
  // Mutation proof: layer L's attention scale × mutation_factor in every forward of the export (GptTrainable::
  // perturb_attention_scale); the check must then fail. −1: none.
  int perturbed_attention_layer = -1;
  // Mutation proof: this Adam group's lr_mul × mutation_factor (a recipe override of ours; the reference keeps its
  // own).
  std::string perturbed_adam_group;
  // Mutation proof: NorMuon's learning rate (optimizer.bank_lr, every bank) × mutation_factor (a recipe override
  // of ours; the reference keeps its own).
  bool perturbed_bank_lr = false;
  // Mutation proof: the MUDD coefficients of layer 10 (μ = M_0(x), §2.7's 0.1 scale) × mutation_factor in every
  // forward of the export (GptTrainable::perturb_mudd_scale).
  bool perturbed_mudd_scale = false;
  // How large the mutation is: 1.01 (1%) by default; larger ones measure how far the check is from seeing it.
  double mutation_factor = 1.01;
};

// Two even steps in different stages: 0 and the first even step of stage 1 (the first window change).
std::vector<int64_t> default_reference_steps(const Schedule& schedule);

// Checks the options against the recipe (throws gpt::Error naming the flag), writes OUT/manifest.json and the
// tensor files, and returns the manifest's path.
std::filesystem::path write_reference_export(ReferenceExportOptions options);

// The reference state-dict name of one of our §2.2 parameters (or buffers), e.g. embed -> embed.weight.
std::string reference_state_name(const std::string& ours);

}  // namespace gpt
