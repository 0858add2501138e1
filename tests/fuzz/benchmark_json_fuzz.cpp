// Google Benchmark JSON reader of the nightly command (harness/nightly/regression.h): any text is either a list of
// samples or a gpt::Error naming the source.
#include "harness/nightly/regression.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gpt::fuzz::expect_parsed_or_rejected([&] {
    for (const auto& sample : gpt::harness::nightly::parse_google_benchmark_json(text, "fuzz.json")) {
      gpt::fuzz::require(!sample.time_unit.empty(), "a sample has its time unit");
    }
  });
  return 0;
}
