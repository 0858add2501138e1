#pragma once
// A recipe's record target (its [record] table), read from the trainer: `train_gpt --print-recipe --recipe R
// [--set K=V]...` prints the resolved recipe as JSON. The harness never links the trainer, so the trainer that
// runs the sweep is the one that says what its recipe's target is.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/launcher/command.h"

namespace gpt::harness {

struct RecipeTarget {
  double target = 0;
  std::string source;  // where the figure comes from (a rule, a measured baseline)
  std::string recipe_hash;
};

// Asks `trainer` for the resolved recipe; throws gpt::Error naming the trainer and the recipe when it cannot
// (no such program, an unknown recipe, a trainer without --print-recipe, output that is not the expected JSON),
// and CommandTimedOut naming the command when it has not answered within `timeout_s`.
RecipeTarget read_recipe_target(const std::filesystem::path& trainer, const std::string& recipe,
                                const std::vector<std::string>& sets = {}, double timeout_s = kQuickCommandTimeoutS);

// What a trainer says, before any run, of a recipe with its overrides (`--print-recipe --recipe R --set K=V...`):
// accepted (with its record target when the recipe has one), refused (an unknown recipe, an unknown key or a bad
// value: the trainer's complaint), or no answer from a trainer without --print-recipe (an older build, a stand-in).
struct RecipeCheck {
  enum class Verdict { accepted, refused, cannot_tell };
  Verdict verdict = Verdict::cannot_tell;
  std::string message;                 // the trainer's complaint (refused) or why it could not tell
  std::optional<RecipeTarget> target;  // accepted, and the recipe has a [record] target
};
RecipeCheck check_recipe(const std::filesystem::path& trainer, const std::string& recipe,
                         const std::vector<std::string>& sets = {}, double timeout_s = kQuickCommandTimeoutS);

// Parses the JSON that --print-recipe writes; `origin` names the command in errors.
RecipeTarget parse_recipe_target(const std::string& json_text, const std::string& origin);

}  // namespace gpt::harness
