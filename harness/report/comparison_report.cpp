#include "harness/report/comparison_report.h"

#include <fstream>
#include <sstream>

#include "harness/launcher/atomic_file.h"
#include "harness/report/number_format.h"
#include "base/check.h"

namespace gpt::harness {

using report_format::fixed;
using report_format::general;

compare::ComparisonSettings stored_comparison_settings(Store& store, const SweepInfo& sweep) {
  compare::ComparisonSettings s;
  s.target_loss = sweep.target;
  if (sweep.alpha) s.alpha = *sweep.alpha;
  const auto params = store.params(OwnerKind::sweep, sweep.id);
  const auto number = [&](const char* key) -> std::optional<double> {
    if (!params.count(key)) return std::nullopt;
    try {
      return std::stod(params.at(key));
    } catch (const std::exception&) {
      GPT_FAIL("sweep '", sweep.name, "': parameter '", key, "' is not a number: '", params.at(key), "'");
    }
  };
  s.fail_if_slower_pct = number("fail_if_slower_pct");
  if (const auto mean = number("published_mean_val_loss")) {
    compare::PublishedFigures published;
    published.mean_val_loss = *mean;
    published.runs = static_cast<int>(number("published_runs").value_or(0));
    published.mean_train_time_s = number("published_mean_train_time_s");
    s.published = published;
  }
  return s;
}

namespace {

std::string step_text(const RunRecord& r) {
  if (!r.steps) return "-";
  std::string text = std::to_string(*r.steps);  // appended: GCC 12's -O3 -Wrestrict misfires on "/" + string
  if (r.total_steps) text.append(1, '/').append(std::to_string(*r.total_steps));
  return text;
}

std::string run_line(const RunRecord& r) {
  std::ostringstream o;
  o << "| " << r.arm << " | " << (r.seed ? std::to_string(*r.seed) : "-") << " | " << to_string(r.status) << " | "
    << (r.final_val_loss ? fixed(*r.final_val_loss, 4) : "-") << " | "
    << (r.train_time_ms ? fixed(*r.train_time_ms / 1000.0, 3) : "-") << " | " << step_text(r) << " | " << r.reason
    << " |\n";
  return o.str();
}

std::string test_rows(const char* metric, const compare::ShiftTest& t) {
  std::ostringstream o;
  o << "| " << t.t_name() << " (" << metric << (t.paired ? ", " + std::to_string(t.pairs) + " seeds paired" : "")
    << ") | " << fixed(t.t.t, 3) << " | " << general(t.t.p_value) << " |\n";
  o << "| " << t.rank_name() << " (" << metric << ", " << (t.paired ? t.wilcoxon->method : t.mann_whitney->method)
    << ") | " << fixed(t.paired ? t.wilcoxon->statistic : t.mann_whitney->u, 1) << " | " << general(t.rank_p())
    << " |\n";
  return o.str();
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  write_text_atomically(path, text);  // replaces a symbolic link planted at the name instead of following it
}

}  // namespace

std::string render_comparison_markdown(const ComparisonPage& page, const std::string& reproduce,
                                       const Provenance& provenance) {
  const auto& r = page.report;
  const auto& s = page.settings;
  std::ostringstream o;
  o << "# " << page.title << "\n\n";
  o << "**" << (r.faster ? "FASTER" : (r.slower ? "SLOWER" : "NO SIGNIFICANT TIME DIFFERENCE"))
    << "**: candidate/baseline mean train time " << fixed(r.time_ratio, 4) << " (" << general(100 * s.confidence)
    << "% bootstrap interval " << fixed(r.time_ratio_ci.low, 4) << " .. " << fixed(r.time_ratio_ci.high, 4) << "; "
    << r.time.t_name() << " p = " << general(r.time.t.p_value) << ", alpha " << general(s.alpha) << ").\n\n";
  if (r.slowdown) {
    o << "- Slowdown check (--fail-if-slower " << general(*s.fail_if_slower_pct) << "): **"
      << compare::slowdown_verdict(r, s) << "**\n";
  }
  for (const auto& note : page.revision_notes) o << "- What ran: " << note << "\n";
  if (!page.baseline_recipe.empty()) o << "- What ran: " << arm_recipes_sentence(page) << "\n";
  if (r.candidate_record) o << "- Record check of the candidate: **" << compare::record_check_verdict(r, s) << "**\n";
  if (s.published) {
    o << "- Published baseline: " << s.published->runs << " runs, mean final val loss "
      << fixed(s.published->mean_val_loss, 4);
    if (r.published_drift) {
      o << "; fresh baseline runs " << (r.drifted ? "**DRIFT** from it" : "consistent with it")
        << " (one-sample t, two-sided p = " << general(r.published_drift->p_value) << ")";
    }
    o << "\n";
  }
  o << "\n| | baseline | candidate |\n|---|---:|---:|\n";
  o << "| finished runs | " << r.baseline_time.n << " | " << r.candidate_time.n << " |\n";
  o << "| mean train time (s) | " << fixed(r.baseline_time.mean, 3) << " | " << fixed(r.candidate_time.mean, 3)
    << " |\n";
  o << "| std train time (s) | " << fixed(r.baseline_time.std, 3) << " | " << fixed(r.candidate_time.std, 3) << " |\n";
  o << "| mean final val loss | " << (r.baseline_loss ? fixed(r.baseline_loss->mean, 4) : "-") << " | "
    << (r.candidate_loss ? fixed(r.candidate_loss->mean, 4) : "-") << " |\n";
  o << "\n| test | statistic | p |\n|---|---:|---:|\n" << test_rows("time", r.time);
  if (r.loss) o << test_rows("final loss", *r.loss);
  o << "\n## Runs\n\n| arm | seed | status | final val loss | train time (s) | last step | reason |\n"
       "|---|---:|---|---:|---:|---:|---|\n";
  for (const auto* arm : {&page.baseline_runs, &page.candidate_runs}) {
    for (const auto& run : *arm) o << run_line(run);
  }
  o << provenance_markdown(provenance);
  if (!reproduce.empty()) o << "\nReproduce: `" << reproduce << "`\n";
  return o.str();
}

ComparisonReportFiles write_comparison_reports(Store& store, const SweepInfo& sweep, const ComparisonPage& page,
                                               const std::filesystem::path& dir) {
  ComparisonReportFiles files;
  files.html = write_comparison_html(store, sweep, page, dir);
  files.markdown = dir / "report.md";
  write_text(files.markdown,
             render_comparison_markdown(
                 page, reproduce_command(sweep, store.params(OwnerKind::sweep, sweep.id), store.db().path()),
                 collect_provenance(store, sweep, page_runs(page))));
  return files;
}

}  // namespace gpt::harness
