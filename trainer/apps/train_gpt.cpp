// train_gpt: the NanoGPT speedrun trainer (ARCHITECTURE.md, trainer ↔ harness contract).
//   train_gpt --recipe NAME|FILE --data DIR --seed N --run-id ID --out DIR [--backend cpu|cuda] [--gpus N | --ranks N]
//             [--set key=value]... [--resume CHECKPOINT] [--checkpoint-every K] [--threads N]
//   train_gpt --print-recipe --recipe NAME|FILE [--set key=value]...
//   train_gpt --list-keys
//   each form also takes [--log-level trace|debug|info|warn|error|off | --quiet]: diagnostics on stderr only (the
//   run log and its step lines on stdout are unaffected).
// --print-recipe writes the resolved recipe's name, hash and [record] target as one JSON object on stdout and
// exits (the harness reads a recipe's record target this way; it never links the trainer). --list-keys prints the
// recipe key table (the schema of trainer/recipe/recipe_keys.cpp) as Markdown, as docs/recipes.md shows it.
// --gpus N (CUDA) starts N local processes, one per GPU, with NCCL between them; --ranks N (CPU) starts N local
// processes under mpirun; either way the ranks are also started by mpirun, srun or torchrun directly.
// Exit status: 0 finished, 3 diverged (summary written), 2 bad input or usage, 1 other failure.
// The program itself is trainer/run/trainer_program.cpp, run here with the GPT.
#include "trainer/run/trainer_program.h"

int main(int argc, char** argv) {
  return gpt::run_trainer_program(argc, argv, {"train_gpt", gpt::make_model, gpt::MemoryFitCheck::check});
}
