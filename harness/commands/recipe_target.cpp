#include "harness/commands/recipe_target.h"

#include <cmath>
#include <optional>
#include <nlohmann/json.hpp>

#include "harness/launcher/command.h"
#include "base/check.h"

namespace gpt::harness {

RecipeTarget parse_recipe_target(const std::string& json_text, const std::string& origin) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const std::exception& e) {
    GPT_FAIL(origin, ": expected the recipe as JSON, got '", json_text.substr(0, 120), "' (", e.what(), ")");
  }
  const auto* record = doc.is_object() && doc.contains("record") ? &doc.at("record") : nullptr;
  GPT_CHECK(record != nullptr && record->is_object() && record->contains("target") && record->at("target").is_number(),
            origin, ": the recipe JSON has no numeric record.target (a trainer older than the [record] table?)");
  RecipeTarget t;
  t.target = record->at("target").get<double>();
  GPT_CHECK(std::isfinite(t.target) && t.target > 0, origin, ": record.target must be a positive number, got ",
            t.target);
  if (record->contains("source") && record->at("source").is_string())
    t.source = record->at("source").get<std::string>();
  if (doc.contains("hash") && doc.at("hash").is_string()) t.recipe_hash = doc.at("hash").get<std::string>();
  return t;
}

namespace {

// `trainer --print-recipe --recipe R [--set K=V]...`: its argv (for messages) and what it answered.
struct RecipeAnswer {
  std::vector<std::string> argv;
  CommandResult result;
  std::string first_error_line;  // the trainer's own complaint: an unknown recipe, a flag it does not know
};

RecipeAnswer ask_for_recipe(const std::filesystem::path& trainer, const std::string& recipe,
                            const std::vector<std::string>& sets, double timeout_s) {
  RecipeAnswer answer;
  answer.argv = {trainer.string(), "--print-recipe", "--recipe", recipe};
  for (const auto& set : sets) answer.argv.insert(answer.argv.end(), {"--set", set});
  CommandSpec spec;
  spec.argv = answer.argv;
  spec.timeout_s = timeout_s;
  answer.result = run_command(spec);
  answer.first_error_line = answer.result.err.substr(0, answer.result.err.find('\n'));
  return answer;
}

}  // namespace

RecipeTarget read_recipe_target(const std::filesystem::path& trainer, const std::string& recipe,
                                const std::vector<std::string>& sets, double timeout_s) {
  GPT_CHECK(std::filesystem::exists(trainer), "no trainer at '", trainer.string(),
            "' to read the record target of "
            "recipe '",
            recipe, "' from");
  const RecipeAnswer a = ask_for_recipe(trainer, recipe, sets, timeout_s);
  const std::string& err = a.first_error_line;
  GPT_CHECK(a.result.succeeded(), "cannot read the record target of recipe '", recipe, "' from '", trainer.string(),
            "': it exited with status ", a.result.status(), err.empty() ? "" : " (" + err + ")");
  return parse_recipe_target(a.result.out, join_command(a.argv));
}

RecipeCheck check_recipe(const std::filesystem::path& trainer, const std::string& recipe,
                         const std::vector<std::string>& sets, double timeout_s) {
  RecipeCheck check;
  std::error_code ec;
  if (!std::filesystem::exists(trainer, ec)) {
    check.message = "no trainer at '" + trainer.string() + "'";
    return check;
  }
  const RecipeAnswer a = ask_for_recipe(trainer, recipe, sets, timeout_s);
  if (!a.result.succeeded()) {
    // A trainer that does not know the flag says so naming it; any other complaint is about the recipe.
    const bool no_flag = a.result.err.find("--print-recipe") != std::string::npos;
    check.verdict = no_flag ? RecipeCheck::Verdict::cannot_tell : RecipeCheck::Verdict::refused;
    check.message =
        a.first_error_line.empty() ? "it exited with status " + std::to_string(a.result.status()) : a.first_error_line;
    return check;
  }
  check.verdict = RecipeCheck::Verdict::accepted;
  try {
    check.target = parse_recipe_target(a.result.out, join_command(a.argv));
  } catch (const gpt::Error& e) {
    check.message = e.what();  // a recipe without a [record] target: accepted all the same
  }
  return check;
}

}  // namespace gpt::harness
