// standin_train_gpt: train_gpt's program (trainer/run/trainer_program.h) with the stand-in model of
// tests/common/standin_model.h, for the tests that start the trainer as a child process (its command line, ranks,
// signals and exit statuses) without the cost of the GPT. No part of the product.
#include "tests/common/standin_model.h"
#include "trainer/run/trainer_program.h"

int main(int argc, char** argv) {
  return gpt::run_trainer_program(argc, argv,
                                  {"standin_train_gpt", gpt::make_standin_model, gpt::MemoryFitCheck::skip});
}
