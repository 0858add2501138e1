// The background-built next loader call (trainer/data/call_prefetcher.h): the same calls in the same order as the
// plain loader, whatever is prefetched; positions of taken calls only; errors at the call that makes them.
#include "trainer/data/call_prefetcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/check.h"
#include "tests/data/data_test_util.h"

namespace gpt {
namespace {

using test::options_for;
using test::ShardSet;
using ::testing::HasSubstr;

const CallShape kShort{.slice_tokens = 9, .max_doc_tokens = 100};
const CallShape kLong{.slice_tokens = 20, .max_doc_tokens = 8};

void expect_same_calls(const std::vector<Microbatch>& got, const std::vector<Microbatch>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].inputs, want[i].inputs) << i;
    EXPECT_EQ(got[i].targets, want[i].targets) << i;
    EXPECT_EQ(got[i].cu_seqlens, want[i].cu_seqlens) << i;
    EXPECT_EQ(got[i].bigram_ids, want[i].bigram_ids) << i;
    EXPECT_EQ(got[i].pieces, want[i].pieces) << i;
    EXPECT_EQ(got[i].shard_index, want[i].shard_index) << i;
  }
}

void add_two_shards(ShardSet& set) {
  set.add(std::vector<int>(40, 10));
  set.add(std::vector<int>(60, 7));
}

TEST(CallPrefetcher, PrefetchedCallsEqualThePlainLoadersAcrossAShardSwitch) {
  ShardSet set;
  add_two_shards(set);
  TrainLoader plain(options_for(set, 1, 0));
  CallPrefetcher prefetcher(TrainLoader(options_for(set, 1, 0)));
  prefetcher.prefetch(kShort);
  // Shard 0 holds five calls of eight one-document slices; the sixth is rebuilt from shard 1.
  for (int call = 0; call < 7; ++call) {
    const std::vector<Microbatch> want = plain.next(kShort);
    expect_same_calls(prefetcher.take(kShort), want);
    EXPECT_EQ(prefetcher.position(), plain.position()) << "call " << call;
    EXPECT_EQ(want.front().shard_index, call < 5 ? 0 : 1) << "call " << call;
    prefetcher.prefetch(kShort);  // the next step's call, built while this one would run
  }
  EXPECT_EQ(prefetcher.prefetched_calls(), 7);
  EXPECT_EQ(prefetcher.direct_calls(), 0);
}

TEST(CallPrefetcher, AShapeChangeRebuildsTheCallFromTheSamePosition) {
  ShardSet set;
  add_two_shards(set);
  TrainLoader plain(options_for(set, 1, 0));
  CallPrefetcher prefetcher(TrainLoader(options_for(set, 1, 0)));
  expect_same_calls(prefetcher.take(kShort), plain.next(kShort));
  prefetcher.prefetch(kShort);  // announced one shape, the stage changed
  expect_same_calls(prefetcher.take(kLong), plain.next(kLong));
  EXPECT_EQ(prefetcher.position(), plain.position());
  prefetcher.prefetch(kLong);
  prefetcher.prefetch(kShort);  // a second announcement replaces the first
  expect_same_calls(prefetcher.take(kShort), plain.next(kShort));
  EXPECT_EQ(prefetcher.position(), plain.position());
  EXPECT_EQ(prefetcher.prefetched_calls(), 1);
  EXPECT_EQ(prefetcher.direct_calls(), 2);
}

TEST(CallPrefetcher, PositionCountsTakenCallsOnly) {
  ShardSet set;
  add_two_shards(set);
  CallPrefetcher prefetcher(TrainLoader(options_for(set, 1, 0)));
  const LoaderPosition start = prefetcher.position();
  prefetcher.prefetch(kShort);
  EXPECT_EQ(prefetcher.position(), start) << "a checkpoint taken now must not skip the prefetched call";
  (void)prefetcher.take(kShort);
  EXPECT_EQ(prefetcher.position(), (LoaderPosition{0, 8}));
}

TEST(CallPrefetcher, AnErrorOfAPrefetchedCallIsThrownByItsTake) {
  ShardSet set;
  set.add(std::vector<int>(10, 10));  // one call of 8 slices, then the data is exhausted
  CallPrefetcher prefetcher(TrainLoader(options_for(set, 1, 0)));
  (void)prefetcher.take(kShort);
  prefetcher.prefetch(kShort);  // fails in the background: nothing is thrown yet
  try {
    (void)prefetcher.take(kShort);
    FAIL() << "the exhausted data must be reported";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("training data exhausted"));
    EXPECT_THAT(e.what(), HasSubstr(set.paths[0].string()));
  }
}

TEST(CallPrefetcher, AFailedPrefetchForAnotherShapeIsDiscarded) {
  ShardSet set;
  set.add(std::vector<int>(20, 10));
  CallPrefetcher prefetcher(TrainLoader(options_for(set, 1, 0)));
  // 20 documents hold two calls of 8 one-document slices, not one call of 8 slices of 50 tokens.
  prefetcher.prefetch(CallShape{.slice_tokens = 50, .max_doc_tokens = 100});
  EXPECT_EQ(prefetcher.take(kShort).size(), 8u);
  EXPECT_EQ(prefetcher.position(), (LoaderPosition{0, 8}));
}

TEST(CallPrefetcher, DestroyingWithACallInFlightWaitsForIt) {
  ShardSet set;
  add_two_shards(set);
  auto prefetcher = std::make_unique<CallPrefetcher>(TrainLoader(options_for(set, 1, 0)));
  prefetcher->prefetch(kShort);
  prefetcher.reset();  // must not leave a thread reading a destroyed loader (ASan/TSan would see it)
  SUCCEED();
}

// The prefetcher reuses a built call only for an equal shape: equality must see each field, so that shapes that
// differ in any one of them (a stage change of T, Lmax, R or the §S.1 cap alone) are different calls.
TEST(CallShape, EqualityComparesEveryField) {
  const CallShape base{.slice_tokens = 64, .max_doc_tokens = 100, .cu_seqlens_rows = 4, .segment_cap = 32};
  EXPECT_EQ(base, (CallShape{.slice_tokens = 64, .max_doc_tokens = 100, .cu_seqlens_rows = 4, .segment_cap = 32}));
  CallShape other = base;
  other.slice_tokens = 65;
  EXPECT_NE(other, base);
  other = base;
  other.max_doc_tokens = 99;
  EXPECT_NE(other, base);
  other = base;
  other.cu_seqlens_rows = 5;
  EXPECT_NE(other, base);
  other = base;
  other.segment_cap = 0;
  EXPECT_NE(other, base);
}

}  // namespace
}  // namespace gpt
