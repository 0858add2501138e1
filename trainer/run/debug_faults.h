#pragma once
// The faults a test plants in a run through its hidden switches (RunOptions: debug.inject_nan_step, debug.fault):
// divergence, a rank's error and a rank's death, before a chosen training step; divergence also before the final
// validation (debug.inject_nan_step = the step count), where only the validation loss can show it.
#include <cstdint>

#include "trainer/run/training_run.h"
#include "trainer/step/trainable_model.h"

namespace gpt {

// Writes one NaN into lm_head (or the first parameter): every logit row then has a NaN and so does the loss.
void poison_parameters(TrainableModel& model);

// Before training step `step` on rank `rank`: poisons the parameters at debug.inject_nan_step; at debug.fault's
// STEP on its RANK poisons them (nan), throws (error) or sends this process SIGKILL (kill).
void inject_debug_faults(const RunOptions& options, int64_t step, int rank, TrainableModel& model);

// Before the final validation (step = total): poisons the parameters when debug.inject_nan_step = total.
void inject_final_validation_faults(const RunOptions& options, int64_t total, TrainableModel& model);

}  // namespace gpt
