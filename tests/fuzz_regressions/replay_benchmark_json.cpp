// The benchmark_json fuzz target's input function, renamed so that the corpus replay (corpus_replay_test.cpp) can call
// it.
#define LLVMFuzzerTestOneInput replay_benchmark_json_input
#include "tests/fuzz/benchmark_json_fuzz.cpp"
