// The shard fuzz target's input function, renamed so that the corpus replay (corpus_replay_test.cpp) can call it.
#define LLVMFuzzerTestOneInput replay_shard_input
#include "tests/fuzz/shard_fuzz.cpp"
