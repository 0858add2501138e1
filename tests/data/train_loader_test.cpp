// BOS-aligned training loader (RECIPE §1.3–§1.5): piece rule, shard switch, world-size independence, resume.
#include "trainer/data/train_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "base/check.h"
#include "tests/data/data_test_util.h"

namespace gpt {
namespace {

using test::make_documents;
using test::ScratchDir;
using ::testing::HasSubstr;

// Plans on a shard made of documents of the given lengths.
std::optional<std::vector<SlicePlan>> plan_docs(const std::vector<int>& lengths, std::int64_t& cursor, int slices,
                                                std::int64_t T, std::int64_t lmax) {
  const auto tokens = make_documents(lengths);
  const auto bos = bos_positions(tokens);
  return plan_call(bos, static_cast<std::int64_t>(tokens.size()), cursor, slices, T, lmax);
}

TEST(PlanCall, WholeDocumentThenCutToFit) {
  std::int64_t cursor = 0;
  const auto plans = plan_docs({5, 3, 10, 2}, cursor, 1, 7, 100);
  ASSERT_TRUE(plans);
  // T + 1 = 8 tokens: the first document whole (5), then 3 tokens of the second.
  EXPECT_EQ((*plans)[0], (SlicePlan{{0, 5}, {5, 8}}));
  EXPECT_EQ(cursor, 2);
}

TEST(PlanCall, DocumentsLongerThanLmaxAreCut) {
  std::int64_t cursor = 0;
  const auto plans = plan_docs({10, 10}, cursor, 1, 7, 4);
  ASSERT_TRUE(plans);
  EXPECT_EQ((*plans)[0], (SlicePlan{{0, 4}, {10, 14}}));  // 4 + 4 = T + 1
}

TEST(PlanCall, NextSliceStartsAtNextBosDiscardingRemainder) {
  std::int64_t cursor = 0;
  const auto plans = plan_docs({6, 6, 6, 6}, cursor, 2, 4, 100);
  ASSERT_TRUE(plans);
  EXPECT_EQ((*plans)[0], (SlicePlan{{0, 5}}));
  EXPECT_EQ((*plans)[1], (SlicePlan{{6, 11}}));
  EXPECT_EQ(cursor, 2);
}

TEST(PlanCall, LastDocumentRunsToShardEnd) {
  std::int64_t cursor = 0;
  const auto plans = plan_docs({3, 2}, cursor, 1, 4, 100);
  ASSERT_TRUE(plans);
  EXPECT_EQ((*plans)[0], (SlicePlan{{0, 3}, {3, 5}}));
}

TEST(PlanCall, ExhaustionLeavesCursorUnchanged) {
  std::int64_t cursor = 1;
  EXPECT_FALSE(plan_docs({5, 5, 5}, cursor, 2, 6, 100));
  EXPECT_EQ(cursor, 1);
  cursor = 3;
  EXPECT_FALSE(plan_docs({5, 5, 5}, cursor, 1, 1, 100));
}

TEST(PlanCall, RejectsBadShapes) {
  std::int64_t cursor = 0;
  EXPECT_THROW((void)plan_docs({5}, cursor, 1, 0, 10), Error);
  EXPECT_THROW((void)plan_docs({5}, cursor, 1, 4, 0), Error);
  cursor = 9;
  EXPECT_THROW((void)plan_docs({5}, cursor, 1, 4, 10), Error);
}

TEST(MaterializeSlice, InputsTargetsAndTables) {
  const auto tokens = make_documents({5, 3, 10});
  const SlicePlan plan = {{0, 5}, {5, 8}};
  const CallShape shape{.slice_tokens = 7, .max_doc_tokens = 100, .cu_seqlens_rows = 4};
  const Microbatch mb = materialize_slice(tokens, plan, shape, kTinyBigramRows);
  ASSERT_EQ(mb.inputs.size(), 7u);
  ASSERT_EQ(mb.targets.size(), 7u);
  for (std::size_t t = 0; t < 7; ++t) {
    EXPECT_EQ(mb.inputs[t], tokens[t]);
    EXPECT_EQ(mb.targets[t], tokens[t + 1]);
  }
  EXPECT_EQ(mb.cu_seqlens, (std::vector<std::int32_t>{0, 5, 7, 7}));
  EXPECT_EQ(mb.max_seqlen, 5);
  EXPECT_EQ(mb.bigram_ids, bigram_row_ids(mb.inputs, kTinyBigramRows - 1));
  EXPECT_EQ(mb.sign_rows, bigram_sign_rows(mb.inputs));
  EXPECT_EQ(mb.bigram_ids[0], kTinyBigramRows - 1);
}

TEST(MaterializeSlice, LastInputPredictsNextDocumentsBos) {
  const auto tokens = make_documents({4, 4});
  const CallShape shape{.slice_tokens = 4, .max_doc_tokens = 100};
  const Microbatch mb = materialize_slice(tokens, SlicePlan{{0, 4}, {4, 5}}, shape, kHeadBigramRows);
  EXPECT_EQ(mb.targets.back(), kBosToken);  // not masked
  EXPECT_EQ(mb.cu_seqlens[0], 0);
  EXPECT_EQ(mb.cu_seqlens[1], 4);
  EXPECT_EQ(mb.cu_seqlens[2], 4);  // empty last segment
  EXPECT_EQ(mb.cu_seqlens.size(), 128u);
}

TEST(MaterializeSlice, PlanOfWrongSizeIsAnError) {
  const auto tokens = make_documents({10});
  const CallShape shape{.slice_tokens = 7, .max_doc_tokens = 100};
  EXPECT_THROW((void)materialize_slice(tokens, SlicePlan{{0, 5}}, shape, kHeadBigramRows), Error);
  EXPECT_THROW((void)materialize_slice(tokens, SlicePlan{{0, 20}}, shape, kHeadBigramRows), Error);
}

// Documents of random lengths (BOS included) in [1, max_len].
std::vector<int> random_lengths(std::mt19937& rng, int count, int max_len) {
  std::uniform_int_distribution<int> dist(1, max_len);
  std::vector<int> lengths(static_cast<std::size_t>(count));
  for (int& len : lengths) len = dist(rng);
  return lengths;
}

using test::options_for;
using test::ShardSet;

// Checks every §1.3/§1.4 invariant of one microbatch against the shard it came from.
void check_invariants(const Microbatch& mb, const std::vector<std::uint16_t>& shard, const CallShape& shape) {
  const auto T = static_cast<std::int32_t>(shape.slice_tokens);
  ASSERT_EQ(mb.inputs.size(), static_cast<std::size_t>(T));
  EXPECT_EQ(mb.inputs[0], kBosToken);
  std::int64_t total = 0;
  for (const Piece& p : mb.pieces) {
    EXPECT_EQ(shard[static_cast<std::size_t>(p.begin)], kBosToken) << "piece must start at a BOS";
    EXPECT_LE(p.length(), shape.max_doc_tokens);
    total += p.length();
  }
  EXPECT_EQ(total, T + 1);
  for (std::int32_t t = 0; t + 1 < T; ++t)
    EXPECT_EQ(mb.targets[static_cast<std::size_t>(t)], mb.inputs[static_cast<std::size_t>(t) + 1]);
  const auto& cu = mb.cu_seqlens;
  EXPECT_EQ(cu.front(), 0);
  EXPECT_EQ(cu.back(), T);
  EXPECT_TRUE(std::is_sorted(cu.begin(), cu.end()));
  // Boundaries below T are exactly the BOS positions of the inputs.
  std::set<std::int32_t> boundaries, bos;
  for (std::int32_t c : cu) {
    if (c < T) boundaries.insert(c);
  }
  for (std::int32_t t = 0; t < T; ++t) {
    if (mb.inputs[static_cast<std::size_t>(t)] == kBosToken) bos.insert(t);
  }
  EXPECT_EQ(boundaries, bos);
  // The table is [0, c_1..c_n] followed only by T; c_n = T and the last segment is the last piece minus 1.
  const std::size_t n = mb.pieces.size();
  EXPECT_EQ(cu[n], T);
  EXPECT_EQ(cu[n] - cu[n - 1], mb.pieces.back().length() - 1);
  for (std::size_t i = n; i < cu.size(); ++i) EXPECT_EQ(cu[i], T);
}

TEST(TrainLoader, InvariantsOverRandomDocuments) {
  std::mt19937 rng(7);
  ShardSet set;
  set.add(random_lengths(rng, 400, 300));
  const CallShape shape{.slice_tokens = 256, .max_doc_tokens = 112};
  TrainLoader loader(options_for(set, 1, 0));
  for (int call = 0; call < 5; ++call) {
    const auto mbs = loader.next(shape);
    ASSERT_EQ(mbs.size(), 8u);
    for (int k = 0; k < 8; ++k) {
      EXPECT_EQ(mbs[static_cast<std::size_t>(k)].slice, k);
      EXPECT_EQ(mbs[static_cast<std::size_t>(k)].microbatch, k);
      check_invariants(mbs[static_cast<std::size_t>(k)], set.tokens[0], shape);
    }
  }
}

// A shard truncated while the loader uses it: its tokens were read whole when it was opened (a mapping would end the
// run with SIGBUS at the first lost page, with no message and no summary), so the calls go on exactly as with the
// file intact; opening the truncated file again is an error naming it.
TEST(TrainLoader, ShardTruncatedWhileInUseChangesNothingAndFailsWhenReopened) {
  std::mt19937 rng(5);
  ShardSet set;
  set.add(random_lengths(rng, 400, 300));
  TrainLoader loader(options_for(set, 1, 0)), intact(options_for(set, 1, 0));
  const CallShape shape{.slice_tokens = 256, .max_doc_tokens = 112};
  (void)loader.next(shape);
  (void)intact.next(shape);
  std::filesystem::resize_file(set.paths[0], 2000);
  const auto after = loader.next(shape), expected = intact.next(shape);
  ASSERT_EQ(after.size(), expected.size());
  for (std::size_t k = 0; k < after.size(); ++k) {
    EXPECT_EQ(after[k].inputs, expected[k].inputs);
    EXPECT_EQ(after[k].targets, expected[k].targets);
  }
  try {
    (void)Shard::open(set.paths[0]);
    FAIL() << "expected an error for the truncated shard";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(set.paths[0].string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated payload"), std::string::npos) << e.what();
  }
}

TEST(TrainLoader, SlicesFollowEachOtherAtConsecutiveBos) {
  std::mt19937 rng(3);
  ShardSet set;
  set.add(random_lengths(rng, 300, 100));
  const auto bos = bos_positions(set.tokens[0]);
  TrainLoader loader(options_for(set, 1, 0));
  const auto mbs = loader.next({.slice_tokens = 64, .max_doc_tokens = 48});
  std::size_t next_bos = 0;
  for (const auto& mb : mbs) {
    for (const Piece& p : mb.pieces) EXPECT_EQ(p.begin, bos[next_bos++]);
  }
  EXPECT_EQ(loader.position().cursor, static_cast<std::int64_t>(next_bos));
}

// All slices of `calls` loader calls for world size W, keyed by (call, slice).
std::map<std::pair<int, int>, Microbatch> run_world(const ShardSet& set, int world, int calls,
                                                    const std::vector<CallShape>& shapes) {
  std::map<std::pair<int, int>, Microbatch> slices;
  for (int rank = 0; rank < world; ++rank) {
    TrainLoader loader(options_for(set, world, rank));
    for (int call = 0; call < calls; ++call) {
      const auto mbs = loader.next(shapes[static_cast<std::size_t>(call) % shapes.size()]);
      EXPECT_EQ(mbs.size(), static_cast<std::size_t>(8 / world));
      for (const auto& mb : mbs) {
        EXPECT_EQ(mb.slice % world, rank);
        EXPECT_EQ(mb.microbatch, mb.slice / world);
        EXPECT_TRUE(slices.emplace(std::make_pair(call, mb.slice), mb).second);
      }
    }
  }
  return slices;
}

TEST(TrainLoader, WorldSizesConsumeTheSameSlices) {
  std::mt19937 rng(11);
  ShardSet set;
  set.add(random_lengths(rng, 120, 400));  // small: forces shard switches within the run
  set.add(random_lengths(rng, 120, 400));
  set.add(random_lengths(rng, 400, 400));
  const std::vector<CallShape> shapes = {{.slice_tokens = 128, .max_doc_tokens = 64},
                                         {.slice_tokens = 320, .max_doc_tokens = 200}};
  const auto reference = run_world(set, 1, 20, shapes);
  ASSERT_EQ(reference.size(), 160u);
  for (int world : {2, 4, 8}) {
    const auto other = run_world(set, world, 20, shapes);
    ASSERT_EQ(other.size(), reference.size()) << "W=" << world;
    for (const auto& [key, mb] : reference) {
      const Microbatch& got = other.at(key);
      EXPECT_EQ(got.inputs, mb.inputs) << "W=" << world << " call " << key.first << " slice " << key.second;
      EXPECT_EQ(got.targets, mb.targets);
      EXPECT_EQ(got.cu_seqlens, mb.cu_seqlens);
      EXPECT_EQ(got.bigram_ids, mb.bigram_ids);
      EXPECT_EQ(got.sign_rows, mb.sign_rows);
      EXPECT_EQ(got.shard_index, mb.shard_index);
    }
  }
  // The run crossed both shard boundaries.
  EXPECT_EQ(reference.rbegin()->second.shard_index, 2);
}

TEST(TrainLoader, ShardSwitchDiscardsPartialCallAndRedoes) {
  ShardSet set;
  set.add(std::vector<int>(20, 10));  // 20 documents of 10 tokens
  set.add(std::vector<int>(50, 7));
  const CallShape shape{.slice_tokens = 9, .max_doc_tokens = 100};  // one document per slice
  TrainLoader loader(options_for(set, 1, 0));
  auto first = loader.next(shape);
  auto second = loader.next(shape);
  EXPECT_EQ(loader.position(), (LoaderPosition{0, 16}));
  // 4 documents left in shard 0 < 8 slices: the call is rebuilt from the first BOS of shard 1.
  auto third = loader.next(shape);
  for (const auto& mb : third) EXPECT_EQ(mb.shard_index, 1);
  EXPECT_EQ(third[0].pieces.front().begin, 0);
  EXPECT_EQ(third[0].pieces, (SlicePlan{{0, 7}, {7, 10}}));
  EXPECT_EQ(loader.position().shard_index, 1);
  EXPECT_EQ(loader.current_shard_path(), set.paths[1]);
}

TEST(TrainLoader, ExhaustedDataIsAnErrorNamingTheLastShard) {
  ShardSet set;
  set.add(std::vector<int>(10, 10));
  TrainLoader loader(options_for(set, 1, 0));
  const CallShape shape{.slice_tokens = 9, .max_doc_tokens = 100};
  (void)loader.next(shape);
  try {
    (void)loader.next(shape);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("training data exhausted"));
    EXPECT_THAT(e.what(), HasSubstr(set.paths[0].string()));
    EXPECT_THAT(e.what(), HasSubstr("data.cycle_train_shards"));
  }
}

TEST(TrainLoader, CyclingRestartsAtTheFirstShardAndCountsPasses) {
  ShardSet set;
  set.add(std::vector<int>(20, 10));  // 20 documents: two calls of 8, 4 left over
  set.add(std::vector<int>(12, 10));  // one call of 8, 4 left over
  const CallShape shape{.slice_tokens = 9, .max_doc_tokens = 100};
  auto options = options_for(set, 1, 0);
  options.cycle_shards = true;
  TrainLoader loader(options);
  const auto first = loader.next(shape);
  (void)loader.next(shape);
  EXPECT_EQ(loader.next(shape)[0].shard_index, 1);
  EXPECT_EQ(loader.passes_begun(), 1);
  // Shard 1 runs out: the call is redone from the first BOS of shard 0, in the second pass.
  const auto again = loader.next(shape);
  EXPECT_EQ(loader.position(), (LoaderPosition{0, 8, 1}));
  EXPECT_EQ(loader.passes_begun(), 2);
  ASSERT_EQ(again.size(), first.size());
  for (std::size_t i = 0; i < again.size(); ++i) EXPECT_EQ(again[i].inputs, first[i].inputs);

  // A saved position in a later pass resumes there, on a cycling loader only.
  const nlohmann::json saved = loader.position();
  TrainLoader resumed(options, saved.get<LoaderPosition>());
  EXPECT_EQ(resumed.passes_begun(), 2);
  EXPECT_EQ(resumed.next(shape)[0].inputs, loader.next(shape)[0].inputs);
  EXPECT_THROW(TrainLoader(options_for(set, 1, 0), saved.get<LoaderPosition>()), Error);
}

TEST(TrainLoader, CyclingOneShardReusesItWithoutReopening) {
  ShardSet set;
  set.add(std::vector<int>(10, 10));
  auto options = options_for(set, 1, 0);
  options.cycle_shards = true;
  TrainLoader loader(options);
  const CallShape shape{.slice_tokens = 9, .max_doc_tokens = 100};
  const auto first = loader.next(shape);
  for (int pass = 2; pass <= 5; ++pass) {
    const auto next = loader.next(shape);
    EXPECT_EQ(loader.passes_begun(), pass);
    EXPECT_EQ(next[7].inputs, first[7].inputs);
  }
}

TEST(TrainLoader, CyclingShardsTooSmallForOneCallIsAnError) {
  ShardSet set;
  set.add(std::vector<int>(5, 10));  // 5 documents < 8 slices
  set.add(std::vector<int>(3, 10));
  auto options = options_for(set, 1, 0);
  options.cycle_shards = true;
  TrainLoader loader(options);
  try {
    (void)loader.next(CallShape{.slice_tokens = 9, .max_doc_tokens = 100});
    FAIL() << "expected an error instead of an endless search";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("no train shard holds one whole call of 8 slices"));
  }
}

TEST(TrainLoader, ResumeFromSavedPositionReproducesStream) {
  std::mt19937 rng(5);
  ShardSet set;
  set.add(random_lengths(rng, 100, 200));
  set.add(random_lengths(rng, 200, 200));
  const CallShape shape{.slice_tokens = 200, .max_doc_tokens = 150};
  TrainLoader straight(options_for(set, 2, 1));
  for (int i = 0; i < 3; ++i) (void)straight.next(shape);
  const nlohmann::json saved = straight.position();
  const auto expected = straight.next(shape);

  TrainLoader resumed(options_for(set, 2, 1), saved.get<LoaderPosition>());
  const auto got = resumed.next(shape);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].inputs, expected[i].inputs);
  EXPECT_EQ(resumed.position(), straight.position());

  TrainLoader seeking(options_for(set, 2, 1));
  seeking.seek(saved.get<LoaderPosition>());
  EXPECT_EQ(seeking.next(shape)[0].inputs, expected[0].inputs);
}

TEST(LoaderPosition, JsonRoundTripAndErrors) {
  const LoaderPosition pos{3, 12345, 2};
  const nlohmann::json j = pos;
  EXPECT_EQ(j.dump(), R"({"cursor":12345,"pass":2,"shard_index":3})");
  EXPECT_EQ(j.get<LoaderPosition>(), pos);
  // Checkpoints written before cycling existed hold no pass: the first pass.
  EXPECT_EQ(nlohmann::json::parse(R"({"cursor":5,"shard_index":1})").get<LoaderPosition>(), (LoaderPosition{1, 5, 0}));
  EXPECT_THROW((void)nlohmann::json::parse(R"({"cursor":1,"shard_index":0,"pass":-1})").get<LoaderPosition>(), Error);
  EXPECT_THROW((void)nlohmann::json::parse(R"({"cursor":1})").get<LoaderPosition>(), Error);
  EXPECT_THROW((void)nlohmann::json::parse(R"({"cursor":"x","shard_index":0})").get<LoaderPosition>(), Error);
}

TEST(TrainLoader, RejectsBadOptionsAndPositions) {
  ShardSet set;
  set.add(std::vector<int>(10, 10));
  EXPECT_THROW(TrainLoader(options_for(set, 3, 0)), Error);
  EXPECT_THROW(TrainLoader(options_for(set, 2, 2)), Error);
  EXPECT_THROW(TrainLoader(options_for(set, 2, 0, 1)), Error);  // 1 slice cannot feed 2 ranks
  EXPECT_THROW(TrainLoader(options_for(set, 1, 0), LoaderPosition{1, 0}), Error);
  EXPECT_THROW(TrainLoader(options_for(set, 1, 0), LoaderPosition{0, 11}), Error);
  EXPECT_NO_THROW(TrainLoader(options_for(set, 1, 0), LoaderPosition{0, 10}));
  TrainLoaderOptions none;
  EXPECT_THROW(TrainLoader{none}, Error);
}

TEST(TrainLoader, OneSlicePerCallForTinyRecipes) {
  std::mt19937 rng(9);
  ShardSet set;
  set.add(random_lengths(rng, 200, 512));
  auto options = options_for(set, 1, 0, 1);
  options.bigram_rows = kTinyBigramRows;
  TrainLoader loader(options);
  const CallShape shape{.slice_tokens = 512, .max_doc_tokens = 112, .cu_seqlens_rows = 128};
  const auto mbs = loader.next(shape);
  ASSERT_EQ(mbs.size(), 1u);
  EXPECT_EQ(loader.microbatches_per_call(), 1);
  check_invariants(mbs[0], set.tokens[0], shape);
  EXPECT_EQ(mbs[0].bigram_ids[0], 50303);
}

TEST(TrainLoader, TooManySegmentsFailsOnEveryRank) {
  ShardSet set;
  set.add(std::vector<int>(400, 2));  // 2-token documents: T = 64 needs 33 segments
  const CallShape shape{.slice_tokens = 64, .max_doc_tokens = 100, .cu_seqlens_rows = 16};
  for (int rank = 0; rank < 8; ++rank) {
    TrainLoader loader(options_for(set, 8, rank));
    EXPECT_THROW((void)loader.next(shape), Error) << "rank " << rank;
  }
}

// §S.1 segment cap: boundaries every `cap` tokens inside a document; the call fails on every rank when the extra
// segments no longer fit R (the documents alone would).
TEST(TrainLoader, SegmentCapSplitsDocumentsAndOverflowIsAnError) {
  ShardSet set;
  set.add(std::vector<int>(40, 100));  // 100-token documents: each slice of T = 64 is one document head
  const CallShape capped{.slice_tokens = 64, .max_doc_tokens = 100, .cu_seqlens_rows = 4, .segment_cap = 32};
  TrainLoader loader(options_for(set, 1, 0, 1));
  const auto mbs = loader.next(capped);
  ASSERT_EQ(mbs.size(), 1u);
  EXPECT_EQ(mbs[0].cu_seqlens, (std::vector<std::int32_t>{0, 32, 64, 64}));
  EXPECT_EQ(mbs[0].max_seqlen, 32);
  const CallShape overflow{.slice_tokens = 64, .max_doc_tokens = 100, .cu_seqlens_rows = 4, .segment_cap = 16};
  for (int rank = 0; rank < 8; ++rank) {
    TrainLoader uncapped_loader(options_for(set, 8, rank));
    EXPECT_NO_THROW(
        (void)uncapped_loader.next(CallShape{.slice_tokens = 64, .max_doc_tokens = 100, .cu_seqlens_rows = 4}))
        << "rank " << rank;
    TrainLoader capped_loader(options_for(set, 8, rank));
    try {
      (void)capped_loader.next(overflow);
      ADD_FAILURE() << "rank " << rank << ": 4 capped segments accepted in a table of 4 rows";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("segments do not fit a table of 4 rows")) << "rank " << rank;
    }
  }
}

TEST(TrainLoader, SkipsShardWithoutAnyBos) {
  ShardSet set;
  set.tokens.push_back(std::vector<std::uint16_t>(100, 17));
  set.paths.push_back(set.dir / "train_0.bin");
  write_shard(set.paths.back(), set.tokens.back());
  set.add(std::vector<int>(20, 10));
  TrainLoader loader(options_for(set, 1, 0));
  const auto mbs = loader.next({.slice_tokens = 9, .max_doc_tokens = 100});
  EXPECT_EQ(mbs[0].shard_index, 1);
}

TEST(TrainLoader, WorksWithoutPrefetch) {
  ShardSet set;
  set.add(std::vector<int>(10, 10));
  set.add(std::vector<int>(10, 10));
  auto options = options_for(set, 1, 0);
  options.prefetch = false;
  TrainLoader loader(options);
  const CallShape shape{.slice_tokens = 9, .max_doc_tokens = 100};
  (void)loader.next(shape);
  EXPECT_EQ(loader.next(shape)[0].shard_index, 1);
}

}  // namespace
}  // namespace gpt
