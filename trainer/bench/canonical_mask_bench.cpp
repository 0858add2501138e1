// RECIPE §S.6 canonical-mask build time on one thread (what the background build costs), and the §S.7 bucketed
// prefix build of one rank at W = 8 beside the whole table. Needs the ranks file (scripts/fetch-tokenizer). Run a
// Release or RelWithDebInfo build; the mask build allocates and fills 316 MB per iteration.
#include <benchmark/benchmark.h>

#include "trainer/tokenizer/canonical_mask.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace {

const gpt::Gpt2Tokenizer& tokenizer() {
  static const gpt::Gpt2Tokenizer tok = gpt::Gpt2Tokenizer::load_default();
  return tok;
}

void BM_CanonicalMaskBuild(benchmark::State& state) {
  const gpt::CanonicalMaskOptions options{.tier0 = state.range(0) != 0, .tier1 = true};
  for (auto _ : state) {
    const gpt::CanonicalMask mask = gpt::build_canonical_mask(tokenizer(), options);
    benchmark::DoNotOptimize(mask.bytes().data());
  }
}
BENCHMARK(BM_CanonicalMaskBuild)->Arg(1)->Arg(0)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_PrefixTableWhole(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(gpt::build_prefix_table(tokenizer()).data());
}
BENCHMARK(BM_PrefixTableWhole)->Unit(benchmark::kMillisecond);

void BM_PrefixTableBucketOfEight(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(gpt::build_prefix_table_bucket(tokenizer(), 0, 8).data());
}
BENCHMARK(BM_PrefixTableBucketOfEight)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
