#pragma once
// Synthetic corpus of the `tiny` recipe (RECIPE §R.1): documents with a learnable next-token rule, so a tiny
// model's loss can fall below the uniform 10.8 nats within seconds on a CPU.
//
// [project definition] exact generator, so every build produces the same bytes:
// - xorshift64*: x ^= x >> 12; x ^= x << 25; x ^= x >> 27; output x · 0x2545F4914F6CDD1D (state starts at the
//   seed); "uniform in [0, n)" = output mod n.
// - A document of length L = 16 + uniform(497) (so L in [16, 512], BOS included): BOS, then token 1 =
//   uniform(50256), then each further token: r = uniform(4); if r < 3 (probability 3/4) with k = uniform(4),
//   next = (40503·prev + 977·k + 1) mod 50256, else next = uniform(50256).
// - The train shard is the first `train_tokens` tokens of the document stream (the last document is cut);
//   the validation shard continues the same generator with a fresh document for `val_tokens` tokens.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace gpt {

class XorShift64Star {
 public:
  explicit XorShift64Star(std::uint64_t seed);
  std::uint64_t next();
  // next() mod n, n > 0.
  std::uint64_t uniform(std::uint64_t n);

 private:
  std::uint64_t state_;
};

struct SyntheticCorpusOptions {
  std::uint64_t seed = 1234;
  std::int64_t train_tokens = 2'000'000;
  std::int64_t val_tokens = 100'000;
};

// The next `count` tokens of whole documents drawn from `rng` (the last document cut at `count`).
std::vector<std::uint16_t> synthetic_documents(XorShift64Star& rng, std::int64_t count);

struct SyntheticCorpus {
  std::vector<std::uint16_t> train;
  std::vector<std::uint16_t> val;
};
SyntheticCorpus make_synthetic_corpus(const SyntheticCorpusOptions& options = {});

// Writes `dir`/train_000000.bin and `dir`/val_000000.bin (creating `dir`); returns the two paths.
std::vector<std::filesystem::path> write_synthetic_corpus(const std::filesystem::path& dir,
                                                          const SyntheticCorpusOptions& options = {});

}  // namespace gpt
