// The logparse fuzz target's input function, renamed so that the corpus replay (corpus_replay_test.cpp) can call it.
#define LLVMFuzzerTestOneInput replay_logparse_input
#include "tests/fuzz/logparse_fuzz.cpp"
