// Recipe parser (trainer/recipe/recipe.h) with `--set` overrides, and the schedule built from what it accepts.
// Input: TOML text; every line after a line `#--set` is one override ("dotted.key=value"). `inherits` resolves
// in the shipped recipe folder. An accepted recipe must survive its canonical form (same hash) and give a
// schedule without overflow (the range checks of the recipe are what keeps the arithmetic in bounds).
#include <sstream>
#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "trainer/recipe/recipe.h"
#include "trainer/schedule/schedule.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gpt::fuzz::require;
  const std::string input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kMarker = "#--set\n";
  const size_t marker = input.find(kMarker);
  const std::string toml_text = input.substr(0, marker);
  std::vector<std::string> overrides;
  if (marker != std::string::npos) {
    std::istringstream lines(input.substr(marker + kMarker.size()));
    for (std::string line; std::getline(lines, line);) overrides.push_back(line);
  }
  gpt::fuzz::expect_parsed_or_rejected([&] {
    const gpt::Recipe recipe = gpt::parse_recipe(toml_text, "fuzz.toml", overrides);
    const gpt::Recipe again = gpt::parse_recipe(recipe.canonical(), "fuzz.toml");
    require(again.hash() == recipe.hash(), "canonical form parses to the same recipe");
    const gpt::Schedule schedule(recipe);
    (void)schedule.at(0);
    (void)schedule.at(schedule.total_steps());
    (void)schedule.total_tokens();
    (void)schedule.yarn_events();
    (void)schedule.warmup_steps();
  });
  return 0;
}
