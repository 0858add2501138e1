// `harness plan`: power analysis for a record attempt, from a stored sweep's ok runs or from a given mean
// and std: the runs needed for the one-sided t-test to reach the wanted power, and the smallest mean
// improvement each run count can prove.
#include "harness/commands/plan.h"

#include <iostream>
#include <map>

#include "harness/report/power_section.h"
#include "harness/stats/stats.h"
#include "base/check.h"

namespace gpt::harness {

namespace {

struct PlanOptions {
  std::string sweep;
  std::string arm;
  std::optional<double> mean, std;
  double target = 3.28;
  double alpha = 0.01;
  double power = 0.8;
  std::vector<std::size_t> runs;
  std::string format = "text";
  bool target_given = false, alpha_given = false;
};

struct Estimate {
  std::string arm;
  double mean, std;
  std::size_t n;  // ok runs behind the estimate (0: given on the command line)
};

std::vector<Estimate> sweep_estimates(Store& store, const PlanOptions& o, double& target, double& alpha) {
  const auto sweep = store.find_sweep(o.sweep);
  GPT_CHECK(sweep.has_value(), "--sweep: no sweep '", o.sweep, "'");
  // A sweep stored without a target (a compare without a record check) has none to lend: 3.28 is track 1's,
  // not necessarily this sweep's recipe's, so it is asked for rather than assumed.
  GPT_CHECK(o.target_given || sweep->target, "--sweep ", o.sweep,
            ": the sweep has no stored target; pass --target LOSS (the record target to plan for)");
  if (!o.target_given) target = *sweep->target;
  if (!o.alpha_given && sweep->alpha) alpha = *sweep->alpha;
  std::map<std::string, std::vector<double>> losses;
  for (const auto& r : store.runs(sweep->id)) {
    if (r.status == RunStatus::ok && r.final_val_loss && (o.arm.empty() || r.arm == o.arm)) {
      losses[r.arm].push_back(*r.final_val_loss);
    }
  }
  GPT_CHECK(!o.arm.empty() || !losses.empty(), "--sweep ", o.sweep, ": the sweep has no ok runs to estimate from");
  GPT_CHECK(o.arm.empty() || losses.count(o.arm), "--arm: sweep '", o.sweep, "' has no ok runs in arm '", o.arm, "'");
  std::vector<Estimate> out;
  for (const auto& [arm, values] : losses) {
    GPT_CHECK(values.size() >= 2, "--sweep ", o.sweep, ": arm '", arm, "' has ", values.size(),
              " ok run(s); the std needs at least 2 (or give --mean and --std)");
    const auto s = stats::summarize(values);
    out.push_back({arm, s.mean, s.std, s.n});
  }
  return out;
}

int run_plan(const PlanOptions& o, GlobalOptions& global) {
  const bool from_sweep = !o.sweep.empty();
  GPT_CHECK(from_sweep != (o.mean.has_value() || o.std.has_value()),
            "plan: give either --sweep ID or both --mean and --std");
  GPT_CHECK(from_sweep || (o.mean && o.std), "plan: --mean and --std go together");
  GPT_CHECK(o.arm.empty() || from_sweep, "plan: --arm needs --sweep");
  for (const auto n : o.runs) GPT_CHECK(n >= 2, "--runs: each run count must be >= 2, got ", n);
  double target = o.target, alpha = o.alpha;
  std::vector<Estimate> estimates;
  if (from_sweep) {
    Store store = open_store(global, /*read_only=*/true);
    estimates = sweep_estimates(store, o, target, alpha);
  } else {
    estimates.push_back({"", *o.mean, *o.std, 0});
  }
  nlohmann::json doc = nlohmann::json::array();
  for (const auto& e : estimates) {
    const auto rows = o.runs.empty() ? default_power_rows(e.n) : o.runs;
    const auto plan = stats::plan_power(e.mean, e.std, target, alpha, o.power, rows);
    if (o.format == "json") {
      auto j = power_json(plan);
      j["arm"] = e.arm;
      j["ok_runs"] = e.n;
      doc.push_back(std::move(j));
    } else {
      if (from_sweep) std::cout << "arm \"" << e.arm << "\" (" << e.n << " ok runs), target " << target << "\n";
      std::cout << power_text(plan) << "\n";
    }
  }
  if (o.format == "json") std::cout << (from_sweep ? doc : doc.at(0)).dump(2) << "\n";
  return kExitPass;
}

}  // namespace

void add_plan_command(CLI::App& app, GlobalOptions& global) {
  auto opts = std::make_shared<PlanOptions>();
  CLI::App* sub = app.add_subcommand("plan", "runs needed for a record attempt to reach the wanted power");
  sub->add_option("--sweep", opts->sweep, "estimate mean and std from this sweep's ok runs (id or name)");
  sub->add_option("--arm", opts->arm, "only this arm of --sweep");
  sub->add_option("--mean", opts->mean, "expected mean final val loss")->check(finite_in(0, kMaxTargetLoss));
  sub->add_option("--std", opts->std, "expected std of the final val loss")->check(finite_in(0, 1e6));
  auto* target =
      sub->add_option("--target", opts->target, "target val loss (default: the sweep's with --sweep, else 3.28)")
          ->check(finite_in(0, kMaxTargetLoss));
  auto* alpha = sub->add_option("--alpha", opts->alpha, "significance level (default 0.01, or the sweep's)")
                    ->check(finite_in(1e-12, 0.999999));
  sub->add_option("--power", opts->power, "wanted power (default 0.8)")->check(finite_in(1e-6, 0.999999));
  sub->add_option("--runs", opts->runs, "run counts to tabulate (default 2,4,...,128 and the sweep's)")->delimiter(',');
  sub->add_option("--format", opts->format, "output format")->check(CLI::IsMember({"text", "json"}));
  sub->callback([opts, target, alpha, &global] {
    opts->target_given = target->count() > 0;
    opts->alpha_given = alpha->count() > 0;
    global.exit_code = run_plan(*opts, global);
  });
}

}  // namespace gpt::harness
