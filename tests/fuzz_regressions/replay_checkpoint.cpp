// The checkpoint fuzz target's input function, renamed so that the corpus replay (corpus_replay_test.cpp) can call it.
#define LLVMFuzzerTestOneInput replay_checkpoint_input
#include "tests/fuzz/checkpoint_fuzz.cpp"
