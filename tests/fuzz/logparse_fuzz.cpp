// Speedrun log parser (harness/logparse/logparse.h): any text splits into runs without crashing, and the
// parsed fields are consistent (line numbers in range, a complete run has a final loss).
#include <algorithm>

#include "harness/logparse/logparse.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gpt::fuzz::require;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  gpt::fuzz::expect_parsed_or_rejected([&] {
    const auto runs = gpt::harness::parse_log(text);
    require(!runs.empty(), "at least one run");
    for (const auto& run : runs) {
      require(run.first_line <= run.last_line && run.last_line <= lines, "line numbers within the text");
      if (run.outcome == gpt::harness::LogOutcome::complete) require(run.final_val_loss.has_value(), "final loss");
    }
  });
  // Single-line entry points on each line.
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line = text.substr(begin, end - begin);
    (void)gpt::harness::parse_step_line(line);
    (void)gpt::harness::parse_peak_memory_line(line);
    begin = end + 1;
  }
  return 0;
}
