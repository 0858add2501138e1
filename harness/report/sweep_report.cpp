#include "harness/report/sweep_report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "harness/launcher/atomic_file.h"
#include "harness/report/number_format.h"
#include "harness/report/power_section.h"
#include "harness/render/svg.h"
#include "base/check.h"

namespace gpt::harness {

namespace {

using report_format::fixed;
using report_format::general;

nlohmann::json opt(const std::optional<double>& x) {
  return x && std::isfinite(*x) ? nlohmann::json(*x) : nlohmann::json(nullptr);
}

nlohmann::json summary_json(const std::optional<stats::Summary>& s) {
  if (!s) return nullptr;
  return {{"n", s->n},           {"mean", s->mean}, {"std", s->std}, {"sem", s->sem},
          {"median", s->median}, {"min", s->min},   {"max", s->max}};
}

std::string seed_text(const RunRecord& r) { return r.seed ? std::to_string(*r.seed) : "-"; }

// "2250/2315": the step a run reached (its final result's step, or the last step it printed).
std::string step_text(const RunRecord& r) {
  if (!r.steps) return "-";
  // Appended piece by piece: GCC 12's -O3 -Wrestrict misfires on "/" + std::string (a Release build is -Werror).
  std::string text = std::to_string(*r.steps);
  if (r.total_steps) text.append(1, '/').append(std::to_string(*r.total_steps));
  return text;
}

void judge(ArmReport& arm, const ReportOptions& o) {
  std::vector<double> losses, times;
  for (const auto& r : arm.ok) {
    if (r.final_val_loss) losses.push_back(*r.final_val_loss);
    if (r.train_time_ms) times.push_back(*r.train_time_ms);
  }
  if (!losses.empty()) arm.loss = stats::summarize(losses);
  if (!times.empty()) arm.time_ms = stats::summarize(times);
  // Finite losses can still overflow the mean or the variance (a val_loss of 1e308): then there is no test
  // to run, which is a FAIL of the check, not an error of the command.
  const bool finite_stats = arm.loss && std::isfinite(arm.loss->mean) && std::isfinite(arm.loss->std);
  if (losses.size() >= 2 && !finite_stats) {
    arm.pass = false;
    arm.verdict = "FAIL: the mean or spread of the final val losses is not finite (mean " + general(arm.loss->mean) +
                  ", std " + general(arm.loss->std) + "); no test is possible";
    if (!arm.not_ok.empty()) arm.verdict += " (" + std::to_string(arm.not_ok.size()) + " run(s) not ok, listed below)";
    return;
  }
  if (losses.size() >= 2) {
    arm.ttest = stats::one_sample_t_less(losses, o.target);
    arm.upper_bound = stats::upper_confidence_bound(losses, 1.0 - o.alpha);
    arm.runs_needed = stats::runs_needed(arm.loss->mean, arm.loss->std, o.target, o.alpha);
    arm.power_plan = stats::plan_power(arm.loss->mean, arm.loss->std, o.target, o.alpha, o.power, {losses.size()});
  }
  if (o.track3 && !losses.empty()) arm.track3_pass = stats::track3_rule(losses, o.target);

  if (losses.size() < 2) {
    arm.pass = false;
    arm.verdict = "FAIL: " + std::to_string(losses.size()) + " ok run(s); the t-test needs at least 2";
  } else if (o.track3) {
    arm.pass = *arm.track3_pass;
    arm.verdict = std::string(arm.pass ? "PASS" : "FAIL") + ": track-3 rule (target - mean) * sqrt(n) = " +
                  fixed((o.target - arm.loss->mean) * std::sqrt(static_cast<double>(losses.size())), 5) +
                  (arm.pass ? " >= " : " < ") + "0.004";
  } else {
    arm.pass = arm.ttest->p_value < o.alpha;
    arm.verdict = std::string(arm.pass ? "PASS" : "FAIL") + ": p = " + general(arm.ttest->p_value) +
                  (arm.pass ? " < " : " >= ") + "alpha = " + general(o.alpha) + " that the mean val loss is below " +
                  fixed(o.target, 4);
  }
  if (!arm.not_ok.empty()) arm.verdict += " (" + std::to_string(arm.not_ok.size()) + " run(s) not ok, listed below)";
  if (arm.cycled_runs > 0) {
    // The statistics stand as a measurement, but reading the train data more than once is outside the rules.
    arm.pass = false;
    arm.verdict = "NOT A RECORD: " + std::to_string(arm.cycled_runs) +
                  " run(s) restarted their train shards (data.cycle_train_shards, a proxy-corpus setting); " +
                  arm.verdict;
  }
}

}  // namespace

std::vector<const RunRecord*> all_runs(const SweepReport& report) {
  std::vector<const RunRecord*> runs;
  for (const auto& arm : report.arms) {
    for (const auto* list : {&arm.ok, &arm.not_ok}) {
      for (const auto& r : *list) runs.push_back(&r);
    }
  }
  return runs;
}

SweepReport build_sweep_report(Store& store, const SweepInfo& sweep, const ReportOptions& options) {
  GPT_CHECK(options.alpha > 0 && options.alpha < 1, "--alpha must be in (0, 1), got ", options.alpha);
  SweepReport report;
  report.sweep = sweep;
  report.options = options;
  report.runs_planned = sweep.runs_planned;
  std::map<std::string, ArmReport> arms;
  for (RunRecord& r : store.runs(sweep.id, /*with_val_points=*/true)) {
    ++report.runs_stored;
    ArmReport& arm = arms[r.arm];
    arm.arm = r.arm;
    if (r.status == RunStatus::ok && store.params(OwnerKind::run, r.id).count("train_data_cycled") != 0)
      ++arm.cycled_runs;
    (r.status == RunStatus::ok ? arm.ok : arm.not_ok).push_back(std::move(r));
  }
  report.pass = !arms.empty();
  for (auto& [name, arm] : arms) {
    judge(arm, options);
    report.pass = report.pass && arm.pass;
    report.arms.push_back(std::move(arm));
  }
  report.provenance = collect_provenance(store, sweep, all_runs(report));
  return report;
}

std::string render_text(const SweepReport& rep) {
  std::ostringstream o;
  const auto& opt = rep.options;
  o << "sweep " << rep.sweep.id << " \"" << rep.sweep.name << "\" (" << rep.sweep.kind;
  if (!rep.sweep.recipe.empty()) o << ", recipe " << rep.sweep.recipe;
  o << "): " << rep.runs_stored << " run(s) stored";
  if (rep.runs_planned > 0) o << " of " << rep.runs_planned << " planned";
  o << "\ntarget val loss " << fixed(opt.target, 4) << ", alpha " << general(opt.alpha) << "\n";
  for (const auto& arm : rep.arms) {
    o << "\n";
    if (!arm.arm.empty() || rep.arms.size() > 1) o << "arm \"" << arm.arm << "\"\n";
    if (arm.loss) {
      o << "  val loss   n=" << arm.loss->n << "  mean " << fixed(arm.loss->mean, 4) << "  std "
        << fixed(arm.loss->std, 4) << "  sem " << fixed(arm.loss->sem, 4) << "  min " << fixed(arm.loss->min, 4)
        << "  max " << fixed(arm.loss->max, 4) << "\n";
    } else {
      o << "  val loss   no ok runs\n";
    }
    if (arm.ttest) {
      o << "  t-test     H1: mean < " << fixed(opt.target, 4) << "  t " << fixed(arm.ttest->t, 3) << "  df "
        << general(arm.ttest->df) << "  p " << general(arm.ttest->p_value) << "\n";
      o << "  " << general(100 * (1 - opt.alpha)) << "% upper bound of the mean " << fixed(*arm.upper_bound, 4) << "\n";
      o << "  runs needed for p < " << general(opt.alpha) << " at this mean/std: "
        << (arm.runs_needed ? std::to_string(*arm.runs_needed) : std::string("never (mean not below target)")) << "\n";
      if (arm.power_plan) o << power_text(*arm.power_plan, "  ");
    }
    if (arm.time_ms) {
      o << "  train time mean " << fixed(arm.time_ms->mean, 0) << " ms  std " << fixed(arm.time_ms->std, 0)
        << "  median " << fixed(arm.time_ms->median, 0) << "  min " << fixed(arm.time_ms->min, 0) << "  max "
        << fixed(arm.time_ms->max, 0) << "\n";
    }
    if (!arm.not_ok.empty()) {
      o << "  runs not ok (excluded from the statistics):\n";
      for (const auto& r : arm.not_ok) {
        o << "    seed " << seed_text(r) << "  " << to_string(r.status) << "  step " << step_text(r) << "  " << r.run_id
          << ": " << r.reason << "\n";
      }
    }
    o << "  " << arm.verdict << "\n";
  }
  if (rep.arms.empty()) o << "\nno runs stored: FAIL\n";
  o << "\n" << provenance_text(rep.provenance);
  o << "\nresult: " << (rep.pass ? "PASS" : "FAIL") << "\n";
  return o.str();
}

nlohmann::json to_json(const SweepReport& rep) {
  nlohmann::json arms = nlohmann::json::array();
  for (const auto& arm : rep.arms) {
    nlohmann::json runs = nlohmann::json::array();
    for (const auto* list : {&arm.ok, &arm.not_ok}) {
      for (const auto& r : *list) {
        runs.push_back({{"id", r.id},
                        {"run_id", r.run_id},
                        {"seed", r.seed ? nlohmann::json(*r.seed) : nullptr},
                        {"status", to_string(r.status)},
                        {"exit_code", r.exit_code ? nlohmann::json(*r.exit_code) : nullptr},
                        {"final_val_loss", opt(r.final_val_loss)},
                        {"train_time_ms", opt(r.train_time_ms)},
                        {"steps", r.steps ? nlohmann::json(*r.steps) : nullptr},
                        {"total_steps", r.total_steps ? nlohmann::json(*r.total_steps) : nullptr},
                        {"log_path", r.log_path},
                        {"reason", r.reason}});
      }
    }
    nlohmann::json a = {{"arm", arm.arm},
                        {"n_ok", arm.ok.size()},
                        {"n_not_ok", arm.not_ok.size()},
                        {"val_loss", summary_json(arm.loss)},
                        {"train_time_ms", summary_json(arm.time_ms)},
                        {"pass", arm.pass},
                        {"verdict", arm.verdict},
                        {"runs", runs}};
    a["t_test"] = arm.ttest
                      ? nlohmann::json{{"t", opt(arm.ttest->t)}, {"df", arm.ttest->df}, {"p_value", arm.ttest->p_value}}
                      : nlohmann::json(nullptr);
    a["upper_confidence_bound"] = opt(arm.upper_bound);
    a["runs_needed"] = arm.runs_needed ? nlohmann::json(*arm.runs_needed) : nlohmann::json(nullptr);
    a["track3_pass"] = arm.track3_pass ? nlohmann::json(*arm.track3_pass) : nlohmann::json(nullptr);
    a["power_analysis"] = arm.power_plan ? power_json(*arm.power_plan) : nlohmann::json(nullptr);
    arms.push_back(std::move(a));
  }
  return {{"sweep",
           {{"id", rep.sweep.id},
            {"name", rep.sweep.name},
            {"kind", rep.sweep.kind},
            {"recipe", rep.sweep.recipe},
            {"created_at", rep.sweep.created_at}}},
          {"target", rep.options.target},
          {"alpha", rep.options.alpha},
          {"track3", rep.options.track3},
          {"runs_planned", rep.runs_planned},
          {"runs_stored", rep.runs_stored},
          {"pass", rep.pass},
          {"arms", arms},
          {"provenance", provenance_json(rep.provenance)}};
}

std::string render_markdown(const SweepReport& rep, const std::vector<std::string>& plot_files) {
  std::ostringstream o;
  o << "# Sweep " << rep.sweep.id << ": " << rep.sweep.name << "\n\n";
  o << "- kind: " << rep.sweep.kind << "\n- recipe: " << (rep.sweep.recipe.empty() ? "-" : rep.sweep.recipe)
    << "\n- created: " << rep.sweep.created_at << "\n- runs stored: " << rep.runs_stored;
  if (rep.runs_planned > 0) o << " of " << rep.runs_planned << " planned";
  o << "\n- target val loss: " << fixed(rep.options.target, 4) << ", alpha " << general(rep.options.alpha)
    << "\n- **result: " << (rep.pass ? "PASS" : "FAIL") << "**\n\n";
  o << "| arm | ok | not ok | mean loss | std | sem | p (mean < target) | upper bound | runs needed | "
       "mean time (ms) | median time (ms) | verdict |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& arm : rep.arms) {
    o << "| " << (arm.arm.empty() ? "(all)" : arm.arm) << " | " << arm.ok.size() << " | " << arm.not_ok.size() << " | "
      << (arm.loss ? fixed(arm.loss->mean, 4) : "-") << " | " << (arm.loss ? fixed(arm.loss->std, 4) : "-") << " | "
      << (arm.loss ? fixed(arm.loss->sem, 4) : "-") << " | " << (arm.ttest ? general(arm.ttest->p_value) : "-") << " | "
      << (arm.upper_bound ? fixed(*arm.upper_bound, 4) : "-") << " | "
      << (arm.runs_needed ? std::to_string(*arm.runs_needed) : "-") << " | "
      << (arm.time_ms ? fixed(arm.time_ms->mean, 0) : "-") << " | "
      << (arm.time_ms ? fixed(arm.time_ms->median, 0) : "-") << " | " << arm.verdict << " |\n";
  }
  bool power_heading = false;  // power analysis per arm with at least 2 ok runs
  for (const auto& arm : rep.arms) {
    if (!arm.power_plan) continue;
    if (!power_heading) o << "\n## Power analysis\n";
    power_heading = true;
    o << "\n" << (rep.arms.size() > 1 ? "**" + arm.arm + "**: " : "") << power_markdown(*arm.power_plan);
  }
  o << "\n## Runs\n\n| arm | seed | run id | status | last step | final val loss | train time (ms) | reason |\n"
       "|---|---|---|---|---|---|---|---|\n";
  for (const auto& arm : rep.arms) {
    for (const auto* list : {&arm.ok, &arm.not_ok}) {
      for (const auto& r : *list) {
        std::string reason = r.reason;
        for (char& c : reason) {
          if (c == '|' || c == '\n') c = ' ';
        }
        o << "| " << (arm.arm.empty() ? "(all)" : arm.arm) << " | " << seed_text(r) << " | " << r.run_id << " | "
          << to_string(r.status) << " | " << step_text(r) << " | "
          << (r.final_val_loss ? fixed(*r.final_val_loss, 4) : "-") << " | "
          << (r.train_time_ms ? fixed(*r.train_time_ms, 0) : "-") << " | " << reason << " |\n";
      }
    }
  }
  o << provenance_markdown(rep.provenance);
  if (!plot_files.empty()) o << "\n## Plots\n\n";
  for (const auto& file : plot_files) o << "![" << file << "](" << file << ")\n\n";
  return o.str();
}

std::filesystem::path write_report_files(const SweepReport& rep, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  // Through a temporary file and a rename: a symbolic link planted at a report's name is replaced, not followed.
  auto write = [&](const std::string& name, const std::string& text) { write_text_atomically(dir / name, text); };
  std::vector<std::string> plots;
  svg::LineChart curves{"Validation loss per run: " + rep.sweep.name, "step", "val loss", {}, rep.options.target};
  svg::StripChart times{"Train time per arm: " + rep.sweep.name, "train time (ms)", {}};
  for (const auto& arm : rep.arms) {
    svg::StripGroup group{arm.arm, {}};
    for (const auto& r : arm.ok) {
      svg::Series s{(arm.arm.empty() ? "" : arm.arm + " ") + "seed " + seed_text(r), {}};
      for (const auto& p : r.val_points) s.points.emplace_back(static_cast<double>(p.step), p.val_loss);
      if (!s.points.empty()) curves.series.push_back(std::move(s));
      if (r.train_time_ms) group.values.push_back(*r.train_time_ms);
    }
    times.groups.push_back(std::move(group));
  }
  if (!curves.series.empty()) {
    write("val_loss_curves.svg", curves.render());
    plots.push_back("val_loss_curves.svg");
  }
  if (!times.groups.empty()) {
    write("train_time.svg", times.render());
    plots.push_back("train_time.svg");
  }
  // Invalid UTF-8 in a stored name (a log file name) is replaced, not thrown: the report must still be written.
  write("report.json", to_json(rep).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  write("report.md", render_markdown(rep, plots));
  return dir / "report.md";
}

}  // namespace gpt::harness
