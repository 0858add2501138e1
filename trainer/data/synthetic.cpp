#include "trainer/data/synthetic.h"

#include "base/check.h"
#include "trainer/data/shard.h"

namespace gpt {

namespace {
constexpr std::uint64_t kMixedTokens = 50256;  // ids [0, 50256): every id but BOS
constexpr std::uint64_t kMinDocTokens = 16;
constexpr std::uint64_t kMaxDocTokens = 512;
}  // namespace

XorShift64Star::XorShift64Star(std::uint64_t seed) : state_(seed) {
  GPT_CHECK(seed != 0, "xorshift64*: the seed must be non-zero (a zero state never leaves zero)");
}

std::uint64_t XorShift64Star::next() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return state_ * 0x2545F4914F6CDD1DULL;
}

std::uint64_t XorShift64Star::uniform(std::uint64_t n) {
  GPT_CHECK(n > 0, "xorshift64*: uniform(n) needs n > 0");
  return next() % n;
}

std::vector<std::uint16_t> synthetic_documents(XorShift64Star& rng, std::int64_t count) {
  GPT_CHECK(count >= 0, "synthetic data: token count must be >= 0, got ", count);
  std::vector<std::uint16_t> tokens;
  tokens.reserve(static_cast<std::size_t>(count));
  while (static_cast<std::int64_t>(tokens.size()) < count) {
    const std::uint64_t length = kMinDocTokens + rng.uniform(kMaxDocTokens - kMinDocTokens + 1);
    tokens.push_back(kBosToken);
    std::uint64_t prev = rng.uniform(kMixedTokens);
    tokens.push_back(static_cast<std::uint16_t>(prev));
    for (std::uint64_t i = 2; i < length; ++i) {
      std::uint64_t next = 0;
      if (rng.uniform(4) < 3) {
        const std::uint64_t k = rng.uniform(4);
        next = (40503 * prev + 977 * k + 1) % kMixedTokens;
      } else {
        next = rng.uniform(kMixedTokens);
      }
      tokens.push_back(static_cast<std::uint16_t>(next));
      prev = next;
    }
  }
  tokens.resize(static_cast<std::size_t>(count));
  return tokens;
}

SyntheticCorpus make_synthetic_corpus(const SyntheticCorpusOptions& options) {
  XorShift64Star rng(options.seed);
  SyntheticCorpus corpus;
  corpus.train = synthetic_documents(rng, options.train_tokens);
  corpus.val = synthetic_documents(rng, options.val_tokens);
  return corpus;
}

std::vector<std::filesystem::path> write_synthetic_corpus(const std::filesystem::path& dir,
                                                          const SyntheticCorpusOptions& options) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  GPT_CHECK(!ec, "synthetic data: cannot create directory ", dir.string(), ": ", ec.message());
  const SyntheticCorpus corpus = make_synthetic_corpus(options);
  std::vector<std::filesystem::path> paths = {dir / "train_000000.bin", dir / "val_000000.bin"};
  write_shard(paths[0], corpus.train);
  write_shard(paths[1], corpus.val);
  return paths;
}

}  // namespace gpt
