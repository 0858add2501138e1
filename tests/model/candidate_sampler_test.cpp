// RECIPE §S.4 candidate sets (trainer/model/candidate_sampler.h) against an independent implementation written
// here: the sweep is built by repeated addition, C from std::set, offsets kept in a plain array.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "base/check.h"
#include "trainer/model/candidate_sampler.h"

namespace gpt::testing {
namespace {

constexpr int64_t kVocab = 50304;

// The independent build: sweep σ[k+1] = (σ[k] + 20011) mod V, offsets ⌊V·k/8⌋.
struct ReferenceSampler {
  int64_t vocab;
  std::vector<int64_t> sweep;
  std::vector<int64_t> offsets;
  bool last_fallback = false;

  ReferenceSampler(int64_t v, int slices) : vocab(v) {
    sweep.resize(static_cast<size_t>(v));
    for (int64_t k = 1; k < v; ++k) sweep[static_cast<size_t>(k)] = (sweep[static_cast<size_t>(k - 1)] + 20011) % v;
    for (int k = 0; k < slices; ++k) offsets.push_back(v * k / 8);
  }

  std::vector<int64_t> build(const std::vector<int64_t>& targets, int64_t p, int slice) {
    const std::set<int64_t> distinct(targets.begin(), targets.end());
    const auto need = p - static_cast<int64_t>(distinct.size());
    const auto take = std::min<int64_t>(vocab, static_cast<int64_t>(1.7 * static_cast<double>(need)) + 256);
    std::vector<int64_t> kept;
    int64_t& offset = offsets[static_cast<size_t>(slice)];
    for (int64_t i = 0; i < take; ++i) {
      const int64_t c = sweep[static_cast<size_t>((offset + i) % vocab)];
      if (!distinct.contains(c)) kept.push_back(c);
    }
    offset = (offset + take) % vocab;
    if (static_cast<int64_t>(kept.size()) >= need) {
      kept.resize(static_cast<size_t>(need));
      last_fallback = false;
    } else {
      std::vector<int64_t> free;
      for (int64_t c = 0; c < vocab; ++c) {
        if (!distinct.contains(c)) free.push_back(c);
      }
      const int64_t stride = std::max<int64_t>(1, static_cast<int64_t>(free.size()) / need);
      kept.clear();
      for (size_t i = 0; i < free.size() && static_cast<int64_t>(kept.size()) < need;
           i += static_cast<size_t>(stride)) {
        kept.push_back(free[i]);
      }
      last_fallback = true;
    }
    std::set<int64_t> c(distinct);
    c.insert(kept.begin(), kept.end());
    return {c.begin(), c.end()};
  }
};

std::vector<int64_t> random_targets(int64_t count, int64_t distinct_pool, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> pick(0, distinct_pool - 1);
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (int64_t& y : out) y = pick(rng);
  return out;
}

void expect_valid(const std::vector<int64_t>& c, const std::vector<int64_t>& targets, int64_t p) {
  ASSERT_EQ(static_cast<int64_t>(c.size()), p);
  EXPECT_TRUE(std::is_sorted(c.begin(), c.end()));
  EXPECT_EQ(std::adjacent_find(c.begin(), c.end()), c.end()) << "C holds a class twice";
  for (int64_t y : targets) EXPECT_TRUE(std::binary_search(c.begin(), c.end(), y)) << "target " << y << " not in C";
}

TEST(CandidateSampler, SweepIsAPermutationOfThePaddedVocabulary) {
  std::vector<char> seen(kVocab, 0);
  int64_t previous = sweep_entry(0, kVocab);
  EXPECT_EQ(previous, 0);
  for (int64_t k = 0; k < kVocab; ++k) {
    const int64_t s = sweep_entry(k, kVocab);
    ASSERT_GE(s, 0);
    ASSERT_LT(s, kVocab);
    EXPECT_EQ(seen[static_cast<size_t>(s)], 0) << "σ repeats " << s << " at k = " << k;
    seen[static_cast<size_t>(s)] = 1;
    if (k > 0) {
      EXPECT_EQ(s, (previous + 20011) % kVocab);
    }
    previous = s;
  }
  EXPECT_EQ(sweep_entry(kVocab + 5, kVocab), sweep_entry(5, kVocab));  // cyclic
  EXPECT_THROW(CandidateSampler(20011 * 2, 1), Error);                 // no permutation
}

TEST(CandidateSampler, InitialOffsetsAreAnEighthOfTheVocabularyPerSlice) {
  CandidateSampler sampler(kVocab, 8);
  for (int k = 0; k < 8; ++k) EXPECT_EQ(sampler.offset(k), 6288 * k);
  EXPECT_EQ(sampler.offsets().shape(), (Shape{8}));
}

// Several builds over interleaved slices: C and every slice's offset agree with the reference after each build,
// and the padding ids 50257..50303 do occur as negatives (the sweep covers the padded vocabulary).
TEST(CandidateSampler, MatchesTheIndependentBuildOverSeveralBuildsAndSlices) {
  CandidateSampler sampler(kVocab, 8);
  ReferenceSampler reference(kVocab, 8);
  const std::vector<int> slices = {0, 3, 0, 7, 3, 5, 0, 7, 1, 1, 6, 2, 4};
  const std::vector<int64_t> sizes = {10240, 2048, 14336, 24576};
  bool saw_padding = false;
  for (size_t i = 0; i < slices.size(); ++i) {
    const int64_t p = sizes[i % sizes.size()];
    const std::vector<int64_t> targets = random_targets(1200 + 50 * static_cast<int64_t>(i), 50257, 11 + i);
    const std::vector<int64_t> c = sampler.build(targets, p, slices[i]);
    const std::vector<int64_t> expected = reference.build(targets, p, slices[i]);
    EXPECT_FALSE(reference.last_fallback);
    EXPECT_EQ(c, expected) << "build " << i;
    expect_valid(c, targets, p);
    for (int k = 0; k < 8; ++k) EXPECT_EQ(sampler.offset(k), reference.offsets[static_cast<size_t>(k)]);
    saw_padding = saw_padding || c.back() > 50256;
  }
  EXPECT_TRUE(saw_padding);
  // The offsets tensor is the live state: reset() returns it to ⌊V·k/8⌋.
  EXPECT_NE(sampler.offsets().data<int64_t>()[0], 0);
  sampler.reset();
  for (int k = 0; k < 8; ++k) EXPECT_EQ(sampler.offsets().data<int64_t>()[k], 6288 * k);
}

// Targets covering 99% of the vocabulary and P a little above their count: the sweep's window cannot supply the
// negatives, so the stride fallback runs (the reference says so); strides 5, 1 and 13.
TEST(CandidateSampler, FallbackTakesStridedFreeClasses) {
  struct Case {
    int64_t distinct, p;
  };
  for (const Case& k : {Case{49800, 49900}, Case{40000, 46000}, Case{49000, 49100}}) {
    std::vector<int64_t> all(kVocab);
    for (int64_t c = 0; c < kVocab; ++c) all[static_cast<size_t>(c)] = c;
    std::mt19937_64 rng(static_cast<uint64_t>(k.distinct + k.p));
    std::shuffle(all.begin(), all.end(), rng);
    std::vector<int64_t> targets(all.begin(), all.begin() + k.distinct);
    targets.push_back(targets.front());  // a repeated target counts once
    CandidateSampler sampler(kVocab, 2);
    ReferenceSampler reference(kVocab, 2);
    for (int build = 0; build < 2; ++build) {
      const std::vector<int64_t> c = sampler.build(targets, k.p, 1);
      EXPECT_EQ(c, reference.build(targets, k.p, 1)) << k.distinct << " targets, P = " << k.p;
      EXPECT_TRUE(reference.last_fallback) << k.distinct << " targets, P = " << k.p;
      expect_valid(c, targets, k.p);
      EXPECT_EQ(sampler.offset(1), reference.offsets[1]);
      EXPECT_EQ(sampler.offset(0), 0);  // other slices untouched
    }
  }
}

TEST(CandidateSampler, NoNegativesNeededStillAdvancesTheOffset) {
  CandidateSampler sampler(kVocab, 1);
  const std::vector<int64_t> targets = {5, 9, 9, 50000, 3};
  EXPECT_EQ(sampler.build(targets, 4, 0), (std::vector<int64_t>{3, 5, 9, 50000}));
  EXPECT_EQ(sampler.offset(0), 256);
}

TEST(CandidateSampler, SmallVocabularyWithPEqualToVHoldsEveryClass) {
  CandidateSampler sampler(64, 1);
  std::vector<int64_t> all(64);
  for (int64_t c = 0; c < 64; ++c) all[static_cast<size_t>(c)] = c;
  EXPECT_EQ(sampler.build(std::vector<int64_t>{7, 3}, 64, 0), all);
}

TEST(CandidateSampler, TooManyDistinctTargetsIsAnErrorNamingBothCounts) {
  CandidateSampler sampler(kVocab, 8);
  const std::vector<int64_t> targets = random_targets(20000, 50257, 3);
  const std::set<int64_t> distinct(targets.begin(), targets.end());
  try {
    sampler.build(targets, 2048, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::to_string(distinct.size()) + " distinct targets"), std::string::npos) << what;
    EXPECT_NE(what.find("P = 2048"), std::string::npos) << what;
  }
  EXPECT_EQ(sampler.offset(0), 0);                                          // a failed build leaves the state alone
  EXPECT_THROW(sampler.build(std::vector<int64_t>{1, 2}, 2048, 8), Error);  // slice outside [0, 8)
  EXPECT_THROW(sampler.build(std::vector<int64_t>{1, kVocab}, 2048, 0), Error);   // target outside the vocabulary
  EXPECT_THROW(sampler.build(std::vector<int64_t>{1, 2}, kVocab + 1, 0), Error);  // P > V
}

// The loss inputs: targets become positions in C; the prefix table is re-indexed by position, −1 where the prefix
// target is −1 or outside C.
TEST(SampledSoftmaxInputs, RemapTargetsAndPrefixTableOntoPositions) {
  const std::vector<int64_t> c = {1, 4, 6, 9};
  std::vector<int64_t> prefix(12, -1);
  prefix[4] = 1;  // in C at position 0
  prefix[6] = 5;  // not in C
  prefix[9] = 6;  // in C at position 2
  const SampledSoftmaxInputs in = sampled_softmax_inputs(c, std::vector<int64_t>{9, 4, 4, 1}, prefix, Device::cpu);
  ASSERT_TRUE(in.active());
  EXPECT_EQ(in.candidates.to_doubles(), (std::vector<double>{1, 4, 6, 9}));
  EXPECT_EQ(in.targets.to_doubles(), (std::vector<double>{3, 1, 1, 0}));
  EXPECT_EQ(in.prefix_table.to_doubles(), (std::vector<double>{-1, 0, -1, 2}));
  EXPECT_FALSE(sampled_softmax_inputs(c, std::vector<int64_t>{4}, {}, Device::cpu).prefix_table.defined());
  EXPECT_THROW(sampled_softmax_inputs(c, std::vector<int64_t>{5}, prefix, Device::cpu), Error);  // target not in C
  EXPECT_THROW(sampled_softmax_inputs(std::vector<int64_t>{4, 1}, std::vector<int64_t>{4}, prefix, Device::cpu),
               Error);  // unsorted
}

}  // namespace
}  // namespace gpt::testing
