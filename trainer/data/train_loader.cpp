#include "trainer/data/train_loader.h"

#include <algorithm>
#include <cstdint>

#include <nlohmann/json.hpp>

#include "base/check.h"

namespace gpt {

std::optional<std::vector<SlicePlan>> plan_call(std::span<const std::int64_t> bos, std::int64_t shard_tokens,
                                                std::int64_t& cursor, int slices, std::int64_t slice_tokens,
                                                std::int64_t max_doc_tokens) {
  GPT_CHECK(slice_tokens > 0, "loader: slice length T must be positive, got ", slice_tokens);
  GPT_CHECK(max_doc_tokens > 0, "loader: Lmax must be positive, got ", max_doc_tokens);
  GPT_CHECK(slices > 0, "loader: slices per call must be positive, got ", slices);
  GPT_CHECK(cursor >= 0 && cursor <= static_cast<std::int64_t>(bos.size()), "loader: cursor ", cursor,
            " outside the BOS index of ", bos.size(), " entries");
  const auto n_bos = static_cast<std::int64_t>(bos.size());
  std::int64_t i = cursor;
  std::vector<SlicePlan> plans(static_cast<std::size_t>(slices));
  for (auto& plan : plans) {
    // Collect T + 1 tokens: each piece is a document head, cut at the next BOS, at Lmax, or to fit exactly.
    std::int64_t filled = 0;
    while (filled <= slice_tokens) {
      if (i >= n_bos) return std::nullopt;
      const std::int64_t start = bos[static_cast<std::size_t>(i)];
      ++i;
      const std::int64_t next_doc = i < n_bos ? bos[static_cast<std::size_t>(i)] : shard_tokens;
      const std::int64_t end = std::min({next_doc, start + max_doc_tokens, start + (slice_tokens - filled) + 1});
      plan.push_back({start, end});
      filled += end - start;
    }
  }
  cursor = i;
  return plans;
}

Microbatch materialize_slice(std::span<const std::uint16_t> tokens, const SlicePlan& plan, const CallShape& shape,
                             std::int32_t bigram_rows, std::int64_t ngram_rows) {
  const std::int64_t T = shape.slice_tokens;
  const std::int32_t rows = shape.cu_seqlens_rows > 0 ? shape.cu_seqlens_rows : default_cu_seqlens_rows(T);
  std::vector<std::int32_t> buf;
  buf.reserve(static_cast<std::size_t>(T + 1));
  std::vector<std::int64_t> lengths;
  lengths.reserve(plan.size());
  for (const Piece& piece : plan) {
    GPT_CHECK(piece.begin >= 0 && piece.begin < piece.end && piece.end <= static_cast<std::int64_t>(tokens.size()),
              "loader: piece [", piece.begin, ", ", piece.end, ") outside the shard of ", tokens.size(), " tokens");
    buf.insert(buf.end(), tokens.begin() + piece.begin, tokens.begin() + piece.end);
    lengths.push_back(piece.length());
  }
  GPT_CHECK(static_cast<std::int64_t>(buf.size()) == T + 1, "loader: slice plan holds ", buf.size(),
            " tokens, expected T + 1 = ", T + 1);
  Microbatch mb;
  mb.inputs.assign(buf.begin(), buf.end() - 1);
  mb.targets.assign(buf.begin() + 1, buf.end());
  mb.cu_seqlens = training_cu_seqlens(lengths, rows, shape.segment_cap);
  mb.max_seqlen = longest_segment(mb.cu_seqlens);
  mb.bigram_ids = bigram_row_ids(mb.inputs, bigram_rows - 1);
  mb.sign_rows = bigram_sign_rows(mb.inputs);
  add_ngram_products(mb, ngram_rows);
  mb.pieces = plan;
  return mb;
}

void add_ngram_products(Microbatch& batch, std::int64_t ngram_rows) {
  GPT_CHECK(ngram_rows >= 0, "loader: ngram_rows must be >= 0, got ", ngram_rows);
  if (ngram_rows == 0) return;
  batch.ngram_rows = ngram_row_ids(batch.inputs, ngram_rows);
  batch.ngram_sign_rows = ngram_sign_rows(batch.inputs);
}

void to_json(nlohmann::json& j, const LoaderPosition& position) {
  j = nlohmann::json{{"shard_index", position.shard_index}, {"cursor", position.cursor}, {"pass", position.pass}};
}

void from_json(const nlohmann::json& j, LoaderPosition& position) {
  GPT_CHECK(j.is_object() && j.contains("shard_index") && j.contains("cursor"),
            "loader position: expected {\"shard_index\": N, \"cursor\": N}, got ", j.dump());
  GPT_CHECK(j.at("shard_index").is_number_integer() && j.at("cursor").is_number_integer(),
            "loader position: shard_index and cursor must be integers, got ", j.dump());
  position.shard_index = j.at("shard_index").get<std::int64_t>();
  position.cursor = j.at("cursor").get<std::int64_t>();
  position.pass = 0;  // checkpoints written before cycling existed have no pass
  if (j.contains("pass")) {
    GPT_CHECK(j.at("pass").is_number_integer() && j.at("pass").get<std::int64_t>() >= 0,
              "loader position: pass must be a non-negative integer, got ", j.dump());
    position.pass = j.at("pass").get<std::int64_t>();
  }
}

struct TrainLoader::LoadedShard {
  std::int64_t index = -1;
  Shard shard;
  std::vector<std::int64_t> bos;
};

// Takes its arguments by value: it runs on the prefetch thread and must not reference the loader.
std::unique_ptr<TrainLoader::LoadedShard> TrainLoader::open_indexed(std::int64_t index, std::filesystem::path path,
                                                                    ShardOpenOptions open) {
  Shard shard = Shard::open(path, open);
  auto bos = bos_positions(shard.tokens());
  return std::make_unique<LoadedShard>(LoadedShard{index, std::move(shard), std::move(bos)});
}

TrainLoader::TrainLoader(TrainLoaderOptions options, LoaderPosition start) : options_(std::move(options)) {
  const int W = options_.world_size;
  GPT_CHECK(!options_.shards.empty(), "loader: no training shards given");
  GPT_CHECK(W == 1 || W == 2 || W == 4 || W == 8, "loader: world size must be 1, 2, 4 or 8, got ", W);
  GPT_CHECK(options_.rank >= 0 && options_.rank < W, "loader: rank ", options_.rank, " outside [0, ", W, ")");
  GPT_CHECK(options_.slices_per_call > 0 && options_.slices_per_call % W == 0, "loader: slices per call (",
            options_.slices_per_call, ") must be a positive multiple of the world size ", W);
  GPT_CHECK(options_.bigram_rows >= 2, "loader: bigram rows must be >= 2, got ", options_.bigram_rows);
  GPT_CHECK(options_.ngram_rows == 0 ||
                (options_.ngram_rows >= 4 && options_.ngram_rows % 2 == 0 && options_.ngram_rows <= INT32_MAX),
            "loader: ngram_rows must be 0 (off) or even, >= 4 and below 2^31, got ", options_.ngram_rows);
  seek(start);
}

TrainLoader::TrainLoader(TrainLoader&&) noexcept = default;
TrainLoader& TrainLoader::operator=(TrainLoader&&) noexcept = default;
TrainLoader::~TrainLoader() = default;

// The shard that follows `shard_index`, or -1 when the list ends there and the loader does not cycle.
std::int64_t TrainLoader::shard_after(std::int64_t shard_index) const {
  const auto n_shards = static_cast<std::int64_t>(options_.shards.size());
  if (shard_index + 1 < n_shards) return shard_index + 1;
  return options_.cycle_shards ? 0 : -1;
}

void TrainLoader::start_prefetch(std::int64_t shard_index) {
  if (!options_.prefetch || shard_index < 0 || shard_index >= static_cast<std::int64_t>(options_.shards.size()) ||
      (current_ != nullptr && current_->index == shard_index)) {
    return;
  }
  prefetch_index_ = shard_index;
  prefetch_ = std::async(std::launch::async, &TrainLoader::open_indexed, shard_index,
                         options_.shards[static_cast<std::size_t>(shard_index)], options_.open);
}

void TrainLoader::load(std::int64_t shard_index) {
  if (current_ != nullptr && current_->index == shard_index) return;
  if (prefetch_.valid() && prefetch_index_ == shard_index) {
    current_ = prefetch_.get();  // rethrows the background thread's error, if any
  } else {
    if (prefetch_.valid()) prefetch_.wait();  // a stale prefetch must not outlive our options
    current_ = open_indexed(shard_index, options_.shards[static_cast<std::size_t>(shard_index)], options_.open);
  }
  start_prefetch(shard_after(shard_index));
}

void TrainLoader::seek(LoaderPosition position) {
  const auto n_shards = static_cast<std::int64_t>(options_.shards.size());
  GPT_CHECK(position.shard_index >= 0 && position.shard_index < n_shards, "loader position: shard_index ",
            position.shard_index, " outside [0, ", n_shards, ")");
  load(position.shard_index);
  const auto n_bos = static_cast<std::int64_t>(current_->bos.size());
  GPT_CHECK(position.cursor >= 0 && position.cursor <= n_bos, "loader position: cursor ", position.cursor,
            " outside [0, ", n_bos, "] for shard ", current_shard_path().string());
  GPT_CHECK(position.pass >= 0 && (position.pass == 0 || options_.cycle_shards), "loader position: pass ",
            position.pass, " needs a loader that cycles its shards");
  position_ = position;
}

const std::filesystem::path& TrainLoader::current_shard_path() const { return current_->shard.path(); }

std::vector<Microbatch> TrainLoader::next(const CallShape& shape) {
  const int slices = options_.slices_per_call;
  // Shard switches without a planned call: more than one full turn of the list means no shard holds a call.
  std::int64_t fruitless_switches = 0;
  for (;;) {
    std::int64_t cursor = position_.cursor;
    auto plans = plan_call(current_->bos, static_cast<std::int64_t>(current_->shard.size()), cursor, slices,
                           shape.slice_tokens, shape.max_doc_tokens);
    if (!plans) {
      // Discard the partial call and redo it from the first BOS of the next shard (§1.3).
      const std::int64_t next_index = shard_after(position_.shard_index);
      GPT_CHECK(next_index >= 0, "loader: training data exhausted: ", "all ", options_.shards.size(),
                " shards consumed (last ", current_shard_path().string(),
                "); provide more train shards (or set data.cycle_train_shards for a proxy corpus)");
      GPT_CHECK(++fruitless_switches <= static_cast<std::int64_t>(options_.shards.size()),
                "loader: no train shard holds one whole call of ", slices, " slices × ", shape.slice_tokens,
                " tokens (last tried ", current_shard_path().string(), ")");
      const std::int64_t pass = position_.pass + (next_index == 0 ? 1 : 0);
      load(next_index);
      position_ = {next_index, 0, pass};
      continue;
    }
    std::vector<Microbatch> own;
    own.reserve(static_cast<std::size_t>(microbatches_per_call()));
    for (int k = 0; k < slices; ++k) {
      const auto& plan = (*plans)[static_cast<std::size_t>(k)];
      if (k % options_.world_size != options_.rank) {
        // Other ranks' slices: check only that their segments fit, so every rank fails together.
        std::vector<std::int64_t> lengths;
        for (const Piece& p : plan) lengths.push_back(p.length());
        const std::int32_t rows =
            shape.cu_seqlens_rows > 0 ? shape.cu_seqlens_rows : default_cu_seqlens_rows(shape.slice_tokens);
        (void)training_cu_seqlens(lengths, rows, shape.segment_cap);
        continue;
      }
      Microbatch mb =
          materialize_slice(current_->shard.tokens(), plan, shape, options_.bigram_rows, options_.ngram_rows);
      mb.slice = k;
      mb.microbatch = k / options_.world_size;
      mb.shard_index = position_.shard_index;
      own.push_back(std::move(mb));
    }
    position_.cursor = cursor;
    return own;
  }
}

}  // namespace gpt
