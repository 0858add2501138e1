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
  if (record->contains("source") && record->at("source").is_string()) t.source = record->at("source").get<std::string>();
  if (doc.contains("hash") && doc.at("hash").is_string()) t.recipe_hash = doc.at("hash").get<std::string>();
  return t;
}

RecipeTarget read_recipe_target(const std::filesystem::path& trainer, const std::string& recipe,
                                const std::vector<std::string>& sets, double timeout_s) {
  GPT_CHECK(std::filesystem::exists(trainer), "no trainer at '", trainer.string(), "' to read the record target of "
            "recipe '", recipe, "' from");
  std::vector<std::string> argv = {trainer.string(), "--print-recipe", "--recipe", recipe};
  for (const auto& set : sets) argv.insert(argv.end(), {"--set", set});
  // The trainer's own complaint (an unknown recipe, a trainer without --print-recipe) goes into the error.
  CommandSpec spec;
  spec.argv = argv;
  spec.timeout_s = timeout_s;
  const CommandResult r = run_command(spec);
  const std::string err = r.err.substr(0, r.err.find('\n'));  // the first line names the problem
  GPT_CHECK(r.succeeded(), "cannot read the record target of recipe '", recipe, "' from '", trainer.string(),
            "': it exited with status ", r.status(), err.empty() ? "" : " (" + err + ")");
  return parse_recipe_target(r.out, join_command(argv));
}

RecipeCheck check_recipe(const std::filesystem::path& trainer, const std::string& recipe,
                         const std::vector<std::string>& sets, double timeout_s) {
  RecipeCheck check;
  std::error_code ec;
  if (!std::filesystem::exists(trainer, ec)) {
    check.message = "no trainer at '" + trainer.string() + "'";
    return check;
  }
  std::vector<std::string> argv = {trainer.string(), "--print-recipe", "--recipe", recipe};
  for (const auto& set : sets) argv.insert(argv.end(), {"--set", set});
  CommandSpec spec;
  spec.argv = argv;
  spec.timeout_s = timeout_s;
  const CommandResult r = run_command(spec);
  const std::string first_line = r.err.substr(0, r.err.find('\n'));
  if (!r.succeeded()) {
    // A trainer that does not know the flag says so naming it; any other complaint is about the recipe.
    const bool no_flag = r.err.find("--print-recipe") != std::string::npos;
    check.verdict = no_flag ? RecipeCheck::Verdict::cannot_tell : RecipeCheck::Verdict::refused;
    check.message = first_line.empty() ? "it exited with status " + std::to_string(r.status()) : first_line;
    return check;
  }
  check.verdict = RecipeCheck::Verdict::accepted;
  try {
    check.target = parse_recipe_target(r.out, join_command(argv));
  } catch (const gpt::Error& e) {
    check.message = e.what();  // a recipe without a [record] target: accepted all the same
  }
  return check;
}

}  // namespace gpt::harness
