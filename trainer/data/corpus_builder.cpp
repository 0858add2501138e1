#include "trainer/data/corpus_builder.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>

#include "base/check.h"
#include "trainer/data/sha1.h"
#include "trainer/data/shard.h"

namespace gpt {

bool SplitRule::is_validation(std::string_view name) const {
  const Sha1Digest digest = sha1(name);
  if (val_fraction >= 0.0) {
    return static_cast<double>(digest_mod(digest, 1'000'000)) < std::round(val_fraction * 1e6);
  }
  return digest_mod(digest, modulus) == 0;
}

std::string SplitRule::describe() const {
  if (val_fraction >= 0.0) return "sha1(name) mod 1e6 < " + std::to_string(val_fraction) + " * 1e6";
  return "sha1(name) mod " + std::to_string(modulus) + " == 0";
}

CorpusBuilder::CorpusBuilder(CorpusBuilderOptions options) : options_(std::move(options)) {
  GPT_CHECK(options_.shard_tokens > 0 && options_.shard_tokens <= INT32_MAX, "corpus: --shard-tokens must be in [1, ",
            INT32_MAX, "], got ", options_.shard_tokens);
  GPT_CHECK(options_.split.modulus > 0, "corpus: split modulus must be positive");
  GPT_CHECK(options_.split.val_fraction <= 1.0, "corpus: --val-fraction must be in [0, 1], got ",
            options_.split.val_fraction);
  std::error_code ec;
  std::filesystem::create_directories(options_.out_dir, ec);
  GPT_CHECK(!ec, "corpus: cannot create output directory ", options_.out_dir.string(), ": ", ec.message());
}

void CorpusBuilder::flush(SplitState& split, bool final) {
  const auto shard_tokens = static_cast<std::size_t>(options_.shard_tokens);
  std::size_t begin = 0;
  while (split.pending.size() - begin >= shard_tokens || (final && begin < split.pending.size())) {
    const std::size_t count = std::min(shard_tokens, split.pending.size() - begin);
    char name[64];
    std::snprintf(name, sizeof(name), "%s_%06zu.bin%s", split.prefix.c_str(), split.written.size(),
                  options_.compress ? ".zst" : "");
    write_shard(options_.out_dir / name, std::span(split.pending).subspan(begin, count));
    split.written.emplace_back(name);
    begin += count;
  }
  split.pending.erase(split.pending.begin(), split.pending.begin() + static_cast<std::ptrdiff_t>(begin));
}

void CorpusBuilder::add_document(std::string_view source, std::string_view name, std::span<const std::int32_t> tokens) {
  GPT_CHECK(!finished_, "corpus: add_document after finish");
  const bool val = options_.split.is_validation(name);
  SplitState& split = val ? val_ : train_;
  for (std::int32_t t : tokens) {  // check first, so a rejected document leaves no trace
    GPT_CHECK(t >= 0 && t < static_cast<std::int32_t>(kTokenIdLimit), "corpus: document ", name, " of ", source,
              " has token id ", t, " outside [0, ", kTokenIdLimit, ")");
  }
  std::vector<std::uint16_t>& target = (!val && options_.shuffle_seed) ? held_train_.emplace_back() : split.pending;
  target.push_back(kBosToken);
  target.insert(target.end(), tokens.begin(), tokens.end());
  const auto n = static_cast<std::int64_t>(tokens.size()) + 1;
  split.counts.documents += 1;
  split.counts.tokens += n;
  auto [it, inserted] = sources_.try_emplace(std::string(source));
  if (inserted) source_order_.emplace_back(source);
  SplitCounts& per_source = val ? it->second.val : it->second.train;
  per_source.documents += 1;
  per_source.tokens += n;
  flush(split, false);
}

void CorpusBuilder::skip_document(std::string_view source) {
  auto [it, inserted] = sources_.try_emplace(std::string(source));
  if (inserted) source_order_.emplace_back(source);
  it->second.skipped += 1;
}

std::vector<std::size_t> shuffled_document_order(std::size_t count, std::uint64_t seed) {
  std::uint64_t state = seed;
  auto next = [&state] {  // SplitMix64
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  std::vector<std::size_t> order(count);
  for (std::size_t i = 0; i < count; ++i) order[i] = i;
  for (std::size_t i = count; i > 1; --i) {
    // j uniform in [0, i): reject draws from the incomplete last block of 2^64.
    const std::uint64_t bound = static_cast<std::uint64_t>(i);
    const std::uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    std::uint64_t draw = next();
    while (draw >= limit) draw = next();
    std::swap(order[i - 1], order[static_cast<std::size_t>(draw % bound)]);
  }
  return order;
}

namespace {

nlohmann::json counts_json(const SplitCounts& c) { return {{"documents", c.documents}, {"tokens", c.tokens}}; }

}  // namespace

nlohmann::json CorpusBuilder::finish() {
  GPT_CHECK(!finished_, "corpus: finish called twice");
  finished_ = true;
  if (options_.shuffle_seed) {
    for (std::size_t i : shuffled_document_order(held_train_.size(), *options_.shuffle_seed)) {
      train_.pending.insert(train_.pending.end(), held_train_[i].begin(), held_train_[i].end());
      std::vector<std::uint16_t>().swap(held_train_[i]);  // release as written
      flush(train_, false);
    }
    held_train_.clear();
  }
  flush(train_, true);
  flush(val_, true);

  // Shards left over from an earlier, larger run in the same directory would silently join the corpus.
  std::set<std::string> keep(train_.written.begin(), train_.written.end());
  keep.insert(val_.written.begin(), val_.written.end());
  for (const auto& entry : std::filesystem::directory_iterator(options_.out_dir)) {
    const std::string name = entry.path().filename().string();
    const bool shard_name = (name.starts_with("train_") || name.starts_with("val_")) &&
                            (name.ends_with(".bin") || name.ends_with(".bin.zst"));
    if (shard_name && keep.count(name) == 0) std::filesystem::remove(entry.path());
  }

  nlohmann::json sources = nlohmann::json::array();
  for (const auto& name : source_order_) {
    const SourceCounts& c = sources_.at(name);
    sources.push_back({{"source", name},
                       {"documents", c.train.documents + c.val.documents},
                       {"tokens", c.train.tokens + c.val.tokens},
                       {"train", counts_json(c.train)},
                       {"val", counts_json(c.val)},
                       {"skipped_empty", c.skipped}});
  }
  nlohmann::json report = {
      {"format", "shards of uint16 GPT-2 ids, header 256 x int32 (20240520, 1, n); each document starts with 50256"},
      {"shard_tokens", options_.shard_tokens},
      {"split", options_.split.describe()},
      {"train_order", options_.shuffle_seed ? "shuffled documents (seed " + std::to_string(*options_.shuffle_seed) + ")"
                                            : std::string("as added")},
      {"documents", train_.counts.documents + val_.counts.documents},
      {"tokens", train_.counts.tokens + val_.counts.tokens},
      {"train", {{"documents", train_.counts.documents}, {"tokens", train_.counts.tokens}, {"shards", train_.written}}},
      {"val", {{"documents", val_.counts.documents}, {"tokens", val_.counts.tokens}, {"shards", val_.written}}},
      {"sources", sources}};
  const auto report_path = options_.out_dir / "report.json";
  const auto tmp = report_path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << report.dump(2) << "\n";
    GPT_CHECK(out.good(), "corpus: cannot write ", tmp);
  }
  std::filesystem::rename(tmp, report_path);
  return report;
}

}  // namespace gpt
