#pragma once
// The trainer program (train_gpt's command line, its rank launcher and its exit statuses) as a library function, so
// that a program with another model runs the same code: train_gpt passes the GPT (trainer/apps/train_gpt.cpp), the
// run-loop tests' stand-in program its small model (tests/programs/standin_train_gpt.cpp).
#include <string>

#include "trainer/run/training_run.h"

namespace gpt {

struct TrainerProgram {
  std::string name;                                   // the program, as its messages and log lines name it
  ModelFactory model;                                 // builds each rank's model
  MemoryFitCheck memory_fit = MemoryFitCheck::check;  // skip: the GPT's memory estimate does not apply to the model
};

// Parses argv as train_gpt does (trainer/apps/train_gpt.cpp describes the command line) and runs, prints or lists;
// `--gpus N` / `--ranks N` start N copies of argv[0]. Returns the process's exit status.
int run_trainer_program(int argc, char** argv, const TrainerProgram& program);

}  // namespace gpt
