// GPT-2 tokenizer throughput on English prose (the Austen fixture shards decoded back to text).
// Needs the ranks file (scripts/fetch-tokenizer). Run a Release or RelWithDebInfo build.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "base/check.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"
#include "source_dir.h"

namespace {

const gpt::Gpt2Tokenizer& tokenizer() {
  static const gpt::Gpt2Tokenizer tok = gpt::Gpt2Tokenizer::load_default();
  return tok;
}

// Tokens of a shard fixture: 256 int32 header (magic, version, count), then uint16 tokens.
std::vector<int32_t> read_shard_tokens(const std::string& name) {
  const std::string path = std::string(SPEEDRUN_SOURCE_DIR) + "/tests/fixtures/" + name;
  std::ifstream in(path, std::ios::binary);
  GPT_CHECK(in.good(), "cannot open shard fixture ", path);
  int32_t header[256];
  in.read(reinterpret_cast<char*>(header), sizeof(header));
  GPT_CHECK(in.good() && header[0] == 20240520 && header[1] == 1 && header[2] > 0, path, ": bad shard header");
  std::vector<uint16_t> tokens(static_cast<size_t>(header[2]));
  in.read(reinterpret_cast<char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * sizeof(uint16_t)));
  GPT_CHECK(in.good(), path, ": truncated");
  return {tokens.begin(), tokens.end()};
}

const std::vector<int32_t>& prose_tokens() {
  static const std::vector<int32_t> tokens = [] {
    std::vector<int32_t> all;
    for (const char* name : {"austen_train_000000.bin", "austen_val_000000.bin"}) {
      const std::vector<int32_t> shard = read_shard_tokens(name);
      all.insert(all.end(), shard.begin() + 1, shard.end());  // drop the leading <|endoftext|>
    }
    return all;
  }();
  return tokens;
}

const std::string& prose_text() {
  static const std::string text = tokenizer().decode(prose_tokens());
  return text;
}

void BM_EncodeProse(benchmark::State& state) {
  const std::string& text = prose_text();
  size_t tokens = 0;
  for (auto _ : state) {
    const std::vector<int32_t> ids = tokenizer().encode_ordinary(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["MB"] =
      benchmark::Counter(static_cast<double>(text.size()) / 1e6, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes/token"] = static_cast<double>(text.size()) / static_cast<double>(tokens);
}
BENCHMARK(BM_EncodeProse)->Unit(benchmark::kMillisecond);

// Per-paragraph calls, as a corpus builder encoding document by document would make them.
void BM_EncodeProseParagraphs(benchmark::State& state) {
  const std::string& text = prose_text();
  std::vector<std::string_view> paragraphs;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = text.find("\n\n", pos);
    end = end == std::string::npos ? text.size() : end + 2;
    paragraphs.push_back(std::string_view(text).substr(pos, end - pos));
    pos = end;
  }
  std::vector<int32_t> ids;
  for (auto _ : state) {
    ids.clear();
    for (const std::string_view paragraph : paragraphs) tokenizer().encode_ordinary_append(paragraph, ids);
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["MB"] =
      benchmark::Counter(static_cast<double>(text.size()) / 1e6, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_EncodeProseParagraphs)->Unit(benchmark::kMillisecond);

void BM_DecodeProse(benchmark::State& state) {
  const std::vector<int32_t>& ids = prose_tokens();
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = tokenizer().decode(ids);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_DecodeProse)->Unit(benchmark::kMillisecond);

// Worst case for merging: one long piece with no whole-token shortcut.
void BM_EncodeLongPiece(benchmark::State& state) {
  std::string word;
  for (int64_t i = 0; i < state.range(0); ++i) word += static_cast<char>('a' + (i * 7 + i / 26) % 26);
  for (auto _ : state) benchmark::DoNotOptimize(tokenizer().encode_ordinary(word).data());
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * state.range(0));
}
BENCHMARK(BM_EncodeLongPiece)->Arg(32)->Arg(1 << 10)->Arg(1 << 16)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
