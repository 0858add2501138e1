// The recipe fuzz target's input function, renamed so that the corpus replay (corpus_replay_test.cpp) can call it.
#define LLVMFuzzerTestOneInput replay_recipe_input
#include "tests/fuzz/recipe_fuzz.cpp"
