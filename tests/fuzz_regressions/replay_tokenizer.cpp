// The tokenizer fuzz target's input function, renamed so that the corpus replay (corpus_replay_test.cpp) can call it.
#define LLVMFuzzerTestOneInput replay_tokenizer_input
#include "tests/fuzz/tokenizer_fuzz.cpp"
