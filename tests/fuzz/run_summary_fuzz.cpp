// Run summary reader (OUT/ID.json, harness/logparse/run_summary.h): any text is either a summary or a
// gpt::Error naming the source.
#include "harness/logparse/run_summary.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  gpt::fuzz::expect_parsed_or_rejected([&] {
    const gpt::harness::RunSummary summary = gpt::harness::parse_run_summary(text, "fuzz.json");
    for (const auto& point : summary.val_history) (void)point;
  });
  return 0;
}
