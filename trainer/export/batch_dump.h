#pragma once
// `--set debug.dump_batches=DIR`: the microbatches of every timed training step and the validation windows of a
// one-rank run, written as raw tensor files (tensor_files.h) with an index, so that another implementation can
// train on exactly our batches and validate on our windows (scripts/side-by-side trains the PyTorch record code on
// them). DIR/steps.jsonl gets one line per step ({"step", "train_loss", "microbatches": [batch, ...]}), flushed as it
// is written, so a killed run leaves a usable prefix; DIR/validation.json lists the windows.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "trainer/data/val_loader.h"
#include "trainer/export/tensor_files.h"

namespace gpt {

class BatchDump {
 public:
  // Creates DIR (and any missing parents); throws gpt::Error naming the folder when it cannot be written.
  explicit BatchDump(const std::filesystem::path& dir);

  void write_validation(const ValLoader& loader);
  // `train_loss`: the step's mean training loss (the mean over its microbatches of Σ_t ℓ_t / T).
  void write_step(int64_t step, const std::vector<Microbatch>& batches, double train_loss);

 private:
  TensorFiles files_;
  std::ofstream steps_;
};

}  // namespace gpt
