// The run_summary fuzz target's input function, renamed so that the corpus replay (corpus_replay_test.cpp) can call it.
#define LLVMFuzzerTestOneInput replay_run_summary_input
#include "tests/fuzz/run_summary_fuzz.cpp"
