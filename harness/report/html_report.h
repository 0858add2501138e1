#pragma once
// Self-contained HTML reports (one file, no network: inline CSS and SVG, no scripts) for a sweep and for a
// branch-vs-baseline comparison: the verdict, the data table, the plots, the environment and the command
// that reproduces the result. The Markdown report stays for PR descriptions.
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "harness/compare/comparison.h"
#include "harness/report/provenance.h"
#include "harness/report/sweep_report.h"
#include "harness/store/store.h"

namespace gpt::harness {

struct HtmlContext {
  Provenance provenance;  // each run's environment as its trainer reported it
  std::string reproduce;  // shell command that runs the sweep again
};

std::string render_sweep_html(const SweepReport& report, const HtmlContext& context);

// A comparison from the two arms' stored runs (arms named "baseline" and "candidate").
struct ComparisonPage {
  std::string title;
  compare::ComparisonSettings settings;
  compare::ComparisonReport report;
  std::vector<RunRecord> baseline_runs, candidate_runs;  // every stored run, ok or not
  std::vector<std::string> revision_notes;               // per arm: its revision against the commit its trainer reports
  std::string baseline_recipe, candidate_recipe;         // what each arm ran (--baseline-recipe / --candidate-recipe)
  // Each arm's recipe overrides (KEY=VALUE: the sweep's --set, then the arm's --baseline-set / --candidate-set) and
  // the recipe hashes its runs' trainers reported (distinct, sorted; empty: none reported).
  std::vector<std::string> baseline_overrides, candidate_overrides;
  std::vector<std::string> baseline_recipe_hashes, candidate_recipe_hashes;
  bool own_command = false;  // the arms ran a command given after `--`: their overrides are its own business
};
std::string render_comparison_html(const ComparisonPage& page, const HtmlContext& context);
// What each arm ran: "baseline: recipe A, overrides K=V, recipe hash H; candidate: ..." (or "recipe A, no overrides,
// recipe hash H in both arms" when the arms agree in recipe, overrides and reported hashes).
std::string arm_recipes_sentence(const ComparisonPage& page);
// Every run of the page, baseline first.
std::vector<const RunRecord*> page_runs(const ComparisonPage& page);

// The recipe a compare sweep's arm runs: its own (--baseline-recipe / --candidate-recipe), else the sweep's.
std::string compare_arm_recipe(const SweepInfo& sweep, const std::map<std::string, std::string>& params,
                               const std::string& arm);

// The command line that repeats a stored sweep (record or compare), shell-quoted; empty when unknown. With `db` (the
// database the sweep is stored in) it names it as --db (absolute): repeated elsewhere, it goes to the same store.
std::string reproduce_command(const SweepInfo& sweep, const std::map<std::string, std::string>& params,
                              const std::filesystem::path& db = {});
std::string shell_quote(const std::string& word);

// Builds the context from the store (the runs' environments, reproduce command) and writes `dir`/report.html.
std::filesystem::path write_sweep_html(Store& store, const SweepReport& report, const std::filesystem::path& dir);

// The comparison page of a stored compare sweep; throws when it lacks two ok runs per arm.
ComparisonPage comparison_page_from_store(Store& store, const SweepInfo& sweep, const compare::ComparisonSettings& s);
std::filesystem::path write_comparison_html(Store& store, const SweepInfo& sweep, const ComparisonPage& page,
                                            const std::filesystem::path& dir);

}  // namespace gpt::harness
