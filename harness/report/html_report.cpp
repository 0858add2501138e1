#include "harness/report/html_report.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>

#include "harness/launcher/atomic_file.h"
#include "harness/report/html_page.h"
#include "harness/render/html_plots.h"
#include "harness/report/number_format.h"
#include "harness/report/power_section.h"
#include "harness/render/svg.h"
#include "base/check.h"

namespace gpt::harness {

namespace {

std::string esc(std::string_view text) { return svg::escape(text); }
using html::page_head;

using report_format::fixed;
using report_format::general;

std::string verdict_badge(bool pass, const std::string& text) {
  return "<p><span class=\"verdict " + std::string(pass ? "pass" : "fail") + "\">" + esc(text) + "</span></p>\n";
}

void reproduce_section(std::ostringstream& o, const HtmlContext& c) {
  o << "<h2>Reproduce</h2>\n";
  if (c.reproduce.empty()) {
    o << "<p>This sweep was imported; no command is known.</p>\n";
  } else {
    o << "<pre>" << esc(c.reproduce) << "</pre>\n";
  }
}

std::string opt_fixed(const std::optional<double>& x, int decimals) { return x ? fixed(*x, decimals) : "-"; }

void runs_table(std::ostringstream& o, const std::vector<const RunRecord*>& runs) {
  o << "<table>\n<tr><th>arm</th><th>seed</th><th>run id</th><th>status</th><th>final val loss</th>"
       "<th>train time (ms)</th><th>steps</th><th>reason</th></tr>\n";
  for (const RunRecord* r : runs) {
    o << "<tr><td>" << esc(r->arm.empty() ? "(all)" : r->arm) << "</td><td class=\"num\">"
      << (r->seed ? std::to_string(*r->seed) : "-") << "</td><td>" << esc(r->run_id) << "</td><td class=\""
      << (r->status == RunStatus::ok ? "status-ok" : "status-bad") << "\">" << to_string(r->status)
      << "</td><td class=\"num\">" << opt_fixed(r->final_val_loss, 4) << "</td><td class=\"num\">"
      << opt_fixed(r->train_time_ms, 0) << "</td><td class=\"num\">" << (r->steps ? std::to_string(*r->steps) : "-")
      << "</td><td>" << esc(r->reason) << "</td></tr>\n";
  }
  o << "</table>\n";
}

// The end every page shares: the plots, every run, the environment and the command that reproduces it.
std::string finish_page(std::ostringstream& o, std::initializer_list<const html::DotPlot*> dot_plots,
                        const html::CurvePlot& curves, const std::vector<const RunRecord*>& runs,
                        const HtmlContext& context) {
  for (const auto* plot : dot_plots) o << "<figure>" << html::render_dot_plot(*plot) << "</figure>\n";
  if (!curves.groups.empty()) o << "<figure>" << html::render_curve_plot(curves) << "</figure>\n";
  o << "<h2>Runs</h2>\n";
  runs_table(o, runs);
  o << provenance_html(context.provenance);
  reproduce_section(o, context);
  o << "</body>\n</html>\n";
  return o.str();
}

std::string arm_name(const std::string& arm) { return arm.empty() ? "(all)" : arm; }

}  // namespace

std::string shell_quote(const std::string& word) {
  if (!word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                              "-_./=:,+@%{}") == std::string::npos) {
    return word;
  }
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

// A compare sweep's trainer options: --backend and --set from the default command line (`{bin} ...`), or the
// whole command after `--` when the user gave one.
std::string trainer_arguments(const SweepInfo& sweep) {
  if (sweep.command.empty()) return "";
  const auto argv = nlohmann::json::parse(sweep.command).get<std::vector<std::string>>();
  std::string out;
  if (argv.empty() || argv.front() != "{bin}") {
    out = " --";
    for (const auto& arg : argv) out += " " + shell_quote(arg);
    return out;
  }
  for (size_t i = 1; i + 1 < argv.size(); ++i) {
    if (argv[i] != "--set" && argv[i] != "--backend") continue;
    out += " " + argv[i] + " " + shell_quote(argv[i + 1]);
    ++i;
  }
  return out;
}

std::string joined(const std::vector<std::string>& words, const char* separator) {
  std::string out;
  for (const auto& word : words) out += (out.empty() ? "" : separator) + word;
  return out;
}

std::string arm_setup(const ComparisonPage& page, const std::string& recipe, const std::vector<std::string>& overrides,
                      const std::vector<std::string>& hashes) {
  std::string text = "recipe " + recipe;
  if (page.own_command) {
    text += ", the command given after --";
  } else {
    text += overrides.empty() ? ", no overrides" : ", overrides " + joined(overrides, " ");
  }
  if (hashes.empty()) return text + ", recipe hash not reported";
  return text + (hashes.size() == 1 ? ", recipe hash " : ", recipe hashes ") + joined(hashes, ", ");
}

// The KEY=VALUE words after each --set of a stored train_gpt command template.
std::vector<std::string> template_overrides(const std::vector<std::string>& argv) {
  std::vector<std::string> sets;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--set") sets.push_back(argv[++i]);
  }
  return sets;
}

}  // namespace

std::string arm_recipes_sentence(const ComparisonPage& page) {
  const std::string baseline =
      arm_setup(page, page.baseline_recipe, page.baseline_overrides, page.baseline_recipe_hashes);
  const std::string candidate =
      arm_setup(page, page.candidate_recipe, page.candidate_overrides, page.candidate_recipe_hashes);
  if (baseline == candidate) return candidate + " in both arms";
  return "baseline: " + baseline + "; candidate: " + candidate;
}

std::string compare_arm_recipe(const SweepInfo& sweep, const std::map<std::string, std::string>& params,
                               const std::string& arm) {
  const auto it = params.find(arm + "_recipe");
  return it != params.end() ? it->second : sweep.recipe;
}

std::string reproduce_command(const SweepInfo& sweep, const std::map<std::string, std::string>& params,
                              const std::filesystem::path& db) {
  auto param = [&](const char* key) { return params.count(key) ? params.at(key) : std::string(); };
  auto timeout_option = [&] {
    const std::string t = param("timeout_s");
    return !t.empty() && std::atof(t.c_str()) > 0 ? " --timeout " + t : std::string();
  };
  std::string cmd;
  if (sweep.kind == "record") {
    cmd = "harness record --runs " + std::to_string(sweep.runs_planned) + " --recipe " + shell_quote(sweep.recipe);
    if (!param("first_seed").empty() && param("first_seed") != "0") cmd += " --first-seed " + param("first_seed");
    if (sweep.target) cmd += " --target " + general(*sweep.target);
    if (sweep.alpha) cmd += " --alpha " + general(*sweep.alpha);
    if (sweep.gpus > 0) cmd += " --gpus " + std::to_string(sweep.gpus);
    if (!param("data").empty()) cmd += " --data " + shell_quote(param("data"));
    cmd += timeout_option();
    if (param("track3") == "1") cmd += " --track3";
    if (!param("launcher").empty() && param("launcher") != "local") cmd += " --launcher " + param("launcher");
    if (!sweep.command.empty()) {
      cmd += " --";
      for (const auto& arg : nlohmann::json::parse(sweep.command).get<std::vector<std::string>>()) {
        cmd += " " + shell_quote(arg);
      }
    }
  } else if (sweep.kind == "compare" && !param("baseline").empty()) {
    cmd = "harness compare --baseline " + shell_quote(param("baseline")) + " --candidate " +
          shell_quote(param("candidate")) + " --runs " + std::to_string(sweep.runs_planned / 2);
    if (!sweep.recipe.empty()) cmd += " --recipe " + shell_quote(sweep.recipe);
    for (const char* arm : {"baseline", "candidate"}) {
      const std::string recipe = param((std::string(arm) + "_recipe").c_str());
      if (!recipe.empty()) cmd += " --" + std::string(arm) + "-recipe " + shell_quote(recipe);
    }
    if (!param("first_seed").empty() && param("first_seed") != "0") cmd += " --first-seed " + param("first_seed");
    if (sweep.target) cmd += " --target " + general(*sweep.target);
    if (sweep.alpha) cmd += " --alpha " + general(*sweep.alpha);
    if (!param("fail_if_slower_pct").empty()) cmd += " --fail-if-slower " + param("fail_if_slower_pct");
    if (!param("preset").empty() && param("preset") != "cpu") cmd += " --preset " + shell_quote(param("preset"));
    if (!param("data").empty()) cmd += " --data " + shell_quote(param("data"));
    if (sweep.gpus > 0) cmd += " --gpus " + std::to_string(sweep.gpus);
    cmd += timeout_option();
    for (const char* arm : {"baseline", "candidate"}) {
      const std::string dir = param((std::string(arm) + "_build_dir").c_str());
      if (!dir.empty()) cmd += " --build-dir " + shell_quote(std::string(arm) + "=" + dir);
    }
    if (!param("cmake_args").empty()) {
      for (const auto& arg : nlohmann::json::parse(param("cmake_args")).get<std::vector<std::string>>()) {
        cmd += " --cmake-arg " + shell_quote(arg);
      }
    }
    if (!param("launcher").empty() && param("launcher") != "local") cmd += " --launcher " + param("launcher");
    cmd += trainer_arguments(sweep);
    for (const char* arm : {"baseline", "candidate"}) {
      const std::string sets = param((std::string(arm) + "_sets").c_str());
      if (sets.empty()) continue;
      for (const auto& s : nlohmann::json::parse(sets).get<std::vector<std::string>>()) {
        cmd += " --" + std::string(arm) + "-set " + shell_quote(s);
      }
    }
  }
  const std::string program = "harness ";
  if (!cmd.empty() && !db.empty()) {
    cmd.insert(program.size(), "--db " + shell_quote(std::filesystem::absolute(db).lexically_normal().string()) + " ");
  }
  return cmd;
}

std::string render_sweep_html(const SweepReport& rep, const HtmlContext& context) {
  std::ostringstream o;
  o << page_head("Sweep " + std::to_string(rep.sweep.id) + ": " + rep.sweep.name);
  o << "<h1>Sweep " << rep.sweep.id << ": " << esc(rep.sweep.name) << "</h1>\n";
  o << verdict_badge(rep.pass, rep.pass ? "PASS" : "FAIL");
  o << "<p>" << esc(rep.sweep.kind) << " sweep, recipe " << esc(rep.sweep.recipe.empty() ? "-" : rep.sweep.recipe)
    << ", created " << esc(rep.sweep.created_at) << "; " << rep.runs_stored << " run(s) stored";
  if (rep.runs_planned > 0) o << " of " << rep.runs_planned << " planned";
  o << ". Target val loss " << fixed(rep.options.target, 4) << ", alpha " << general(rep.options.alpha) << ".</p>\n";

  o << "<h2>Verdict per arm</h2>\n<table>\n<tr><th>arm</th><th>ok</th><th>not ok</th><th>mean loss</th><th>std</th>"
       "<th>p (mean &lt; target)</th><th>upper bound</th><th>runs for power "
    << general(rep.options.power) << "</th><th>mean time (ms)</th><th>verdict</th></tr>\n";
  for (const auto& arm : rep.arms) {
    o << "<tr><td>" << esc(arm_name(arm.arm)) << "</td><td class=\"num\">" << arm.ok.size() << "</td><td class=\"num\">"
      << arm.not_ok.size() << "</td><td class=\"num\">" << (arm.loss ? fixed(arm.loss->mean, 4) : "-")
      << "</td><td class=\"num\">" << (arm.loss ? fixed(arm.loss->std, 4) : "-") << "</td><td class=\"num\">"
      << (arm.ttest ? general(arm.ttest->p_value) : "-") << "</td><td class=\"num\">" << opt_fixed(arm.upper_bound, 4)
      << "</td><td class=\"num\">"
      << (arm.power_plan && arm.power_plan->runs_needed ? std::to_string(*arm.power_plan->runs_needed) : "-")
      << "</td><td class=\"num\">" << (arm.time_ms ? fixed(arm.time_ms->mean, 0) : "-") << "</td><td class=\""
      << (arm.pass ? "status-ok" : "status-bad") << "\">" << esc(arm.verdict) << "</td></tr>\n";
  }
  o << "</table>\n";

  bool power_heading = false;
  for (const auto& arm : rep.arms) {
    if (!arm.power_plan) continue;
    if (!power_heading) o << "<h2>Power analysis</h2>\n";
    power_heading = true;
    const auto& p = *arm.power_plan;
    o << "<p>" << (rep.arms.size() > 1 ? "<b>" + esc(arm_name(arm.arm)) + "</b>: " : "")
      << "effect d = " << fixed(p.effect, 3) << " (mean " << fixed(p.mean, 4) << ", std " << fixed(p.std, 4)
      << "); runs needed for power " << general(p.power) << ": <b>"
      << (p.runs_needed ? std::to_string(*p.runs_needed) : std::string(p.effect > 0 ? "over 10^6" : "never"))
      << "</b>.";
    for (const auto& row : p.rows) {
      o << " With " << row.runs << " runs the power is " << fixed(row.power, 3) << " and the smallest provable "
        << "improvement is " << fixed(row.min_improvement, 5) << " (a true mean of " << fixed(row.max_mean, 5)
        << " or lower).";
    }
    o << "</p>\n";
  }

  o << "<h2>Plots</h2>\n";
  html::DotPlot losses{"Final val loss per run", "final val loss", {}, rep.options.target, "target"};
  html::DotPlot times{"Train time per run", "train time (ms)", {}, std::nullopt, ""};
  html::CurvePlot curves{"Validation loss curves", "step", "val loss", {}, rep.options.target};
  std::vector<const RunRecord*> all_runs;
  for (const auto& arm : rep.arms) {
    html::DotRow loss_row{arm_name(arm.arm), {}}, time_row{arm_name(arm.arm), {}};
    html::CurveGroup group{arm_name(arm.arm), {}};
    for (const auto& r : arm.ok) {
      if (r.final_val_loss) loss_row.values.push_back(*r.final_val_loss);
      if (r.train_time_ms) time_row.values.push_back(*r.train_time_ms);
      std::vector<std::pair<double, double>> points;
      for (const auto& p : r.val_points) points.emplace_back(static_cast<double>(p.step), p.val_loss);
      if (!points.empty()) group.runs.push_back(std::move(points));
    }
    losses.rows.push_back(std::move(loss_row));
    times.rows.push_back(std::move(time_row));
    if (!group.runs.empty()) curves.groups.push_back(std::move(group));
    for (const auto* list : {&arm.ok, &arm.not_ok}) {
      for (const auto& r : *list) all_runs.push_back(&r);
    }
  }
  return finish_page(o, {&losses, &times}, curves, all_runs, context);
}

std::string render_comparison_html(const ComparisonPage& page, const HtmlContext& context) {
  const auto& r = page.report;
  const auto& s = page.settings;
  std::ostringstream o;
  o << page_head(page.title);
  o << "<h1>" << esc(page.title) << "</h1>\n";
  std::string verdict = r.faster ? "FASTER" : (r.slower ? "SLOWER" : "NO SIGNIFICANT TIME DIFFERENCE");
  verdict += ": candidate/baseline mean time " + fixed(r.time_ratio, 4) + " (" + r.time.t_name() +
             " p = " + general(r.time.t.p_value) + ")";
  o << "<p><span class=\"verdict " << (r.faster ? "pass" : (r.slower ? "fail" : "neutral")) << "\">" << esc(verdict)
    << "</span></p>\n";
  if (r.slowdown) {
    o << verdict_badge(!r.too_slow, "slowdown check: " + compare::slowdown_verdict(r, s));
  }
  if (r.candidate_record) {
    o << verdict_badge(r.candidate_passes_record, "record check: " + compare::record_check_verdict(r, s));
  }
  if (r.published_drift) {
    o << verdict_badge(!r.drifted, std::string(r.drifted ? "DRIFT: the fresh baseline runs differ from"
                                                         : "the fresh baseline runs agree with") +
                                       " the published mean loss " + fixed(s.published->mean_val_loss, 4) +
                                       " (one-sample t, p = " + general(r.published_drift->p_value) + ")");
  }
  if (!page.revision_notes.empty() || !page.baseline_recipe.empty()) {
    o << "<h2>What ran</h2>\n<ul>\n";
    for (const auto& note : page.revision_notes) o << "<li>" << esc(note) << "</li>\n";
    if (!page.baseline_recipe.empty()) o << "<li>" << esc(arm_recipes_sentence(page)) << "</li>\n";
    o << "</ul>\n";
  }
  o << "<h2>Statistics</h2>\n<table>\n<tr><th></th><th>baseline</th><th>candidate</th></tr>\n";
  auto row = [&](const char* name, const std::string& b, const std::string& c) {
    o << "<tr><th>" << name << "</th><td class=\"num\">" << b << "</td><td class=\"num\">" << c << "</td></tr>\n";
  };
  row("finished runs", std::to_string(r.baseline_time.n), std::to_string(r.candidate_time.n));
  row("mean train time (s)", fixed(r.baseline_time.mean, 3), fixed(r.candidate_time.mean, 3));
  row("std train time (s)", fixed(r.baseline_time.std, 3), fixed(r.candidate_time.std, 3));
  row("median train time (s)", fixed(r.baseline_time.median, 3), fixed(r.candidate_time.median, 3));
  row("mean final val loss", r.baseline_loss ? fixed(r.baseline_loss->mean, 4) : "-",
      r.candidate_loss ? fixed(r.candidate_loss->mean, 4) : "-");
  o << "</table>\n<table>\n<tr><th>test</th><th>statistic</th><th>p</th></tr>\n";
  auto tests = [&](const char* metric, const compare::ShiftTest& t) {
    o << "<tr><td>" << t.t_name() << " (" << metric;
    if (t.paired) o << ", " << t.pairs << " seeds paired";
    o << ")</td><td class=\"num\">" << fixed(t.t.t, 3) << "</td><td class=\"num\">" << general(t.t.p_value)
      << "</td></tr>\n<tr><td>" << t.rank_name() << " (" << metric << ", "
      << esc(t.paired ? t.wilcoxon->method : t.mann_whitney->method) << ")</td><td class=\"num\">"
      << fixed(t.paired ? t.wilcoxon->statistic : t.mann_whitney->u, 1) << "</td><td class=\"num\">"
      << general(t.rank_p()) << "</td></tr>\n";
  };
  tests("time", r.time);
  if (r.loss) tests("final loss", *r.loss);
  o << "</table>\n<p>Time ratio candidate/baseline " << fixed(r.time_ratio, 4) << ", " << general(100 * s.confidence)
    << "% bootstrap interval [" << fixed(r.time_ratio_ci.low, 4) << ", " << fixed(r.time_ratio_ci.high, 4) << "] ("
    << s.resamples << " resamples, seed " << s.seed << ").</p>\n";

  o << "<h2>Plots</h2>\n";
  html::DotPlot times{"Train time per run", "train time (s)", {}, std::nullopt, ""};
  html::DotPlot losses{"Final val loss per run", "final val loss", {}, s.target_loss, "target"};
  html::CurvePlot curves{"Validation loss curves", "step", "val loss", {}, s.target_loss};
  std::vector<const RunRecord*> all_runs;
  for (const auto* arm : {&page.baseline_runs, &page.candidate_runs}) {
    const std::string name = arm == &page.baseline_runs ? "baseline" : "candidate";
    html::DotRow time_row{name, {}}, loss_row{name, {}};
    html::CurveGroup group{name, {}};
    for (const auto& run : *arm) {
      all_runs.push_back(&run);
      if (run.status != RunStatus::ok) continue;
      if (run.train_time_ms) time_row.values.push_back(*run.train_time_ms / 1000.0);
      if (run.final_val_loss) loss_row.values.push_back(*run.final_val_loss);
      std::vector<std::pair<double, double>> points;
      for (const auto& p : run.val_points) points.emplace_back(static_cast<double>(p.step), p.val_loss);
      if (!points.empty()) group.runs.push_back(std::move(points));
    }
    times.rows.push_back(std::move(time_row));
    losses.rows.push_back(std::move(loss_row));
    if (!group.runs.empty()) curves.groups.push_back(std::move(group));
  }
  return finish_page(o, {&times, &losses}, curves, all_runs, context);
}

namespace {

HtmlContext context_from_store(Store& store, const SweepInfo& sweep, const std::vector<const RunRecord*>& runs) {
  HtmlContext c;
  c.provenance = collect_provenance(store, sweep, runs);
  c.reproduce = reproduce_command(sweep, store.params(OwnerKind::sweep, sweep.id), store.db().path());
  return c;
}

std::filesystem::path write_page(const std::filesystem::path& dir, const std::string& html) {
  std::filesystem::create_directories(dir);
  const auto path = dir / "report.html";
  write_text_atomically(path, html);  // replaces a symbolic link planted at the name instead of following it
  return path;
}

}  // namespace

std::filesystem::path write_sweep_html(Store& store, const SweepReport& report, const std::filesystem::path& dir) {
  return write_page(dir, render_sweep_html(report, context_from_store(store, report.sweep, all_runs(report))));
}

std::vector<const RunRecord*> page_runs(const ComparisonPage& page) {
  std::vector<const RunRecord*> runs;
  for (const auto* arm : {&page.baseline_runs, &page.candidate_runs}) {
    for (const auto& run : *arm) runs.push_back(&run);
  }
  return runs;
}

ComparisonPage comparison_page_from_store(Store& store, const SweepInfo& sweep, const compare::ComparisonSettings& s) {
  ComparisonPage page;
  page.title = "Comparison " + std::to_string(sweep.id) + ": " + sweep.name;
  page.settings = s;
  compare::ArmResults baseline, candidate;
  for (auto& run : store.runs(sweep.id, /*with_val_points=*/true)) {
    const bool is_baseline = run.arm == "baseline";
    GPT_CHECK(is_baseline || run.arm == "candidate", "sweep '", sweep.name, "' has a run in arm '", run.arm,
              "'; a comparison has only the arms baseline and candidate");
    auto& results = is_baseline ? baseline : candidate;
    if (run.status == RunStatus::ok && run.train_time_ms) {
      results.train_time_s.push_back(*run.train_time_ms / 1000.0);
      if (run.seed) results.time_seeds.push_back(*run.seed);
      if (run.final_val_loss) {
        results.final_val_loss.push_back(*run.final_val_loss);
        if (run.seed) results.loss_seeds.push_back(*run.seed);
      }
    }
    (is_baseline ? page.baseline_runs : page.candidate_runs).push_back(std::move(run));
  }
  GPT_CHECK(baseline.train_time_s.size() >= 2 && candidate.train_time_s.size() >= 2, "sweep '", sweep.name,
            "': a comparison needs 2 finished runs per arm, has ", baseline.train_time_s.size(), " baseline and ",
            candidate.train_time_s.size(), " candidate");
  page.report = compare::analyze_comparison(candidate, baseline, s);
  const auto params = store.params(OwnerKind::sweep, sweep.id);
  for (const char* arm : {"baseline", "candidate"}) {
    if (const auto it = params.find(std::string(arm) + "_revision_check"); it != params.end()) {
      page.revision_notes.push_back(it->second);
    }
  }
  page.baseline_recipe = compare_arm_recipe(sweep, params, "baseline");
  page.candidate_recipe = compare_arm_recipe(sweep, params, "candidate");
  const auto argv = sweep.command.empty() ? std::vector<std::string>()
                                          : nlohmann::json::parse(sweep.command).get<std::vector<std::string>>();
  page.own_command = !argv.empty() && argv.front() != "{bin}";
  for (const char* arm : {"baseline", "candidate"}) {
    auto& overrides = std::string(arm) == "baseline" ? page.baseline_overrides : page.candidate_overrides;
    if (!page.own_command) overrides = template_overrides(argv);
    if (const auto it = params.find(std::string(arm) + "_sets"); it != params.end()) {
      for (auto& set : nlohmann::json::parse(it->second).get<std::vector<std::string>>()) overrides.push_back(set);
    }
  }
  // The hash each run's trainer reported for the recipe it resolved: what really ran, overrides included.
  for (auto* arm : {&page.baseline_runs, &page.candidate_runs}) {
    std::set<std::string> hashes;
    for (const auto& run : *arm) {
      const auto run_params = store.params(OwnerKind::run, run.id);
      if (const auto it = run_params.find("recipe_hash"); it != run_params.end()) hashes.insert(it->second);
    }
    (arm == &page.baseline_runs ? page.baseline_recipe_hashes : page.candidate_recipe_hashes)
        .assign(hashes.begin(), hashes.end());
  }
  return page;
}

std::filesystem::path write_comparison_html(Store& store, const SweepInfo& sweep, const ComparisonPage& page,
                                            const std::filesystem::path& dir) {
  return write_page(dir, render_comparison_html(page, context_from_store(store, sweep, page_runs(page))));
}

}  // namespace gpt::harness
