#include "harness/report/site.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "base/user_error.h"
#include "harness/logparse/experiment.h"
#include "harness/nightly/tracked_night.h"
#include "harness/report/comparison_report.h"
#include "harness/render/history_chart.h"
#include "harness/report/html_page.h"
#include "harness/render/html_plots.h"
#include "harness/report/html_report.h"
#include "harness/report/number_format.h"
#include "harness/render/svg.h"
#include "harness/store/change_points.h"
#include "base/check.h"

namespace gpt::harness {
namespace {

namespace fs = std::filesystem;
using report_format::fixed;
using report_format::general;

std::string esc(std::string_view text) { return svg::escape(text); }

void write_page(const fs::path& path, const std::string& html, SiteSummary& summary) {
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary);
  GPT_CHECK(out.good(), "site: cannot write '", path.string(), "'");
  out << html;
  GPT_CHECK(out.good(), "site: error while writing '", path.string(), "'");
  summary.pages.push_back(path);
}

std::string night_anchor(const std::string& gpu, const std::string& stamp) {
  return "night-" + page_slug(gpu) + "-" + page_slug(stamp);
}

// One row of the index's sweep tables.
struct SweepRow {
  SweepInfo sweep;
  std::string verdict, detail;
  bool pass = false;
  bool has_page = false;
};

SweepRow sweep_row(Store& store, const SweepInfo& sweep, const fs::path& out, SiteSummary& summary) {
  SweepRow row{sweep, "-", "", false, false};
  const fs::path dir = out / "sweeps" / std::to_string(sweep.id);
  try {
    if (sweep.kind == "compare") {
      const auto page = comparison_page_from_store(store, sweep, stored_comparison_settings(store, sweep));
      const auto& r = page.report;
      row.verdict = r.faster ? "FASTER" : (r.slower ? "SLOWER" : "no significant difference");
      row.pass = !r.slower;
      row.detail =
          "time ratio " + fixed(r.time_ratio, 4) + " (" + r.time.t_name() + " p = " + general(r.time.t.p_value) + ")";
      summary.pages.push_back(write_comparison_html(store, sweep, page, dir));
    } else {
      ReportOptions options;
      if (sweep.target) options.target = *sweep.target;
      if (sweep.alpha) options.alpha = *sweep.alpha;
      const SweepReport report = build_sweep_report(store, sweep, options);
      row.verdict = report.pass ? "PASS" : "FAIL";
      row.pass = report.pass;
      for (const auto& arm : report.arms) {
        if (!arm.loss) continue;
        if (!row.detail.empty()) row.detail += "; ";
        row.detail += (arm.arm.empty() ? "" : arm.arm + ": ") + "mean loss " + fixed(arm.loss->mean, 4) + " (n " +
                      std::to_string(arm.loss->n) + ")";
      }
      summary.pages.push_back(write_sweep_html(store, report, dir));
    }
    row.has_page = true;
  } catch (const gpt::Error& e) {
    summary.notes.push_back("sweep '" + sweep.name + "': no page (" +
                            user_error_message(e.what(), /*keep_source_locations=*/false) + ")");
  }
  return row;
}

void sweep_table(std::ostringstream& o, const std::vector<SweepRow>& rows) {
  if (rows.empty()) {
    o << "<p>None stored.</p>\n";
    return;
  }
  o << "<table>\n<tr><th>id</th><th>sweep</th><th>kind</th><th>recipe</th><th>created</th><th>runs</th>"
       "<th>verdict</th><th>detail</th></tr>\n";
  for (const auto& r : rows) {
    const std::string name =
        r.has_page ? "<a href=\"sweeps/" + std::to_string(r.sweep.id) + "/report.html\">" + esc(r.sweep.name) + "</a>"
                   : esc(r.sweep.name);
    o << "<tr><td class=\"num\">" << r.sweep.id << "</td><td>" << name << "</td><td>" << esc(r.sweep.kind)
      << "</td><td>" << esc(r.sweep.recipe.empty() ? "-" : r.sweep.recipe) << "</td><td>" << esc(r.sweep.created_at)
      << "</td><td class=\"num\">" << r.sweep.runs_planned << "</td><td class=\""
      << (r.verdict == "-" ? "" : (r.pass ? "status-ok" : "status-bad")) << "\">" << esc(r.verdict) << "</td><td>"
      << esc(r.detail) << "</td></tr>\n";
  }
  o << "</table>\n";
}

// The benchmarks stored, one series per (suite, name, GPU model).
std::vector<nightly::Series> stored_series(Store& store) {
  auto s = store.db().prepare(
      "SELECT DISTINCT b.suite, b.name, COALESCE(e.gpu, '') FROM benchmark_results b "
      "LEFT JOIN environments e ON e.id = b.environment_id ORDER BY 1, 2, 3");
  std::vector<nightly::Series> out;
  while (s.step()) out.push_back({s.column_text(0), s.column_text(1), s.column_text(2)});
  return out;
}

std::string change_label(const ChangePointRecord& c) {
  char relative[32];
  std::snprintf(relative, sizeof relative, "%+.1f%%", 100 * c.relative);
  return std::string(relative) + (c.start_commit.empty() ? "" : " (" + c.start_commit.substr(0, 7) + ")") + ", " +
         c.status;
}

// One benchmark's page: a chart, its change points and its nights per GPU model.
std::string benchmark_page(Store& store, const std::string& title, const std::vector<nightly::Series>& series) {
  std::ostringstream o;
  o << html::page_head(title) << "<p><a href=\"../index.html\">&larr; all sweeps and benchmarks</a></p>\n<h1>"
    << esc(title) << "</h1>\n";
  std::vector<nightly::SeriesHistory> histories;
  for (const auto& s : series) histories.push_back(nightly::load_series(store, s));
  // The longest history first: it is the one a reader came for.
  std::stable_sort(histories.begin(), histories.end(),
                   [](const auto& a, const auto& b) { return a.history.nights.size() > b.history.nights.size(); });
  for (const nightly::SeriesHistory& h : histories) {
    const nightly::Series& s = h.series;
    const auto change_points = load_change_points(store, s.suite, s.name, s.gpu);
    std::string unit = "ns";
    for (const auto& r : store.benchmark_history(std::string_view(s.suite), s.name, std::string_view(s.gpu))) {
      unit = r.unit;
    }
    html::HistoryChart chart{
        s.suite == "smoke" && s.name.find("loss") != std::string::npos ? "final val loss" : "time per iteration",
        unit,
        {},
        {}};
    chart.nights = html::history_nights(h.history.nights, h.history.night_stamps, h.history.night_commits);
    for (const auto& c : change_points) {
      const auto at = std::find(h.history.night_stamps.begin(), h.history.night_stamps.end(), c.start_night);
      if (at == h.history.night_stamps.end()) continue;
      chart.marks.push_back({static_cast<size_t>(at - h.history.night_stamps.begin()), change_label(c),
                             "#" + night_anchor(s.gpu, c.start_night)});
    }
    o << "<h2>" << esc(s.gpu.empty() ? "no GPU named (CPU, or not recorded)" : "on " + s.gpu) << "</h2>\n<figure>"
      << html::render_history_chart(chart) << "</figure>\n";
    if (!change_points.empty()) {
      o << "<table>\n<tr><th>change point</th><th>first slower night</th><th>found</th><th>status</th></tr>\n";
      for (const auto& c : change_points) {
        o << "<tr><td>" << esc(change_label(c)) << "</td><td><a href=\"#" << night_anchor(s.gpu, c.start_night) << "\">"
          << esc(nightly::night_label(c.start_night, c.start_commit)) << "</a></td><td>"
          << esc(nightly::night_label(c.found_night, c.found_commit)) << "</td><td>" << esc(c.status)
          << (c.resolved_night.empty() ? "" : " on " + esc(nightly::night_label(c.resolved_night, "")))
          << "</td></tr>\n";
      }
      o << "</table>\n";
    }
    double largest = 0;
    for (const auto& n : chart.nights) largest = std::max(largest, n.max);
    const auto [shown_unit, divisor] = html::display_unit(unit, largest);  // the chart's unit
    o << "<table>\n<tr><th>night (UTC)</th><th>commit</th><th>mean (" << esc(shown_unit)
      << ")</th><th>min</th>"
         "<th>max</th><th>repetitions</th></tr>\n";
    for (size_t i = chart.nights.size(); i-- > 0;) {  // newest first
      const auto& n = chart.nights[i];
      o << "<tr id=\"" << night_anchor(s.gpu, n.stamp) << "\"><td>" << esc(n.stamp) << "</td><td><code>"
        << esc(n.commit.empty() ? "-" : n.commit) << "</code></td><td class=\"num\">" << general(n.mean / divisor)
        << "</td><td class=\"num\">" << general(n.min / divisor) << "</td><td class=\"num\">"
        << general(n.max / divisor) << "</td><td class=\"num\">" << h.history.nights[i].size() << "</td></tr>\n";
    }
    o << "</table>\n";
  }
  o << "</body>\n</html>\n";
  return o.str();
}

// Record and import sweeps over time: one row per sweep arm, oldest first.
std::string records_page(Store& store, const std::vector<SweepInfo>& sweeps) {
  html::DotPlot losses{"Final val loss per run, by sweep (oldest first)", "final val loss", {}, std::nullopt, ""};
  html::DotPlot times{"Train time per run, by sweep (oldest first)", "train time (s)", {}, std::nullopt, ""};
  for (const auto& sweep : sweeps) {
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> arms;
    for (const auto& r : store.runs(sweep.id)) {
      if (r.status != RunStatus::ok) continue;
      auto& [loss, time] = arms[r.arm];
      if (r.final_val_loss) loss.push_back(*r.final_val_loss);
      if (r.train_time_ms) time.push_back(*r.train_time_ms / 1000.0);
    }
    for (const auto& [arm, values] : arms) {
      const std::string label =
          sweep.created_at.substr(0, 10) + " " + sweep.name + (arm.empty() ? "" : " [" + arm + "]");
      losses.rows.push_back({label, values.first});
      times.rows.push_back({label, values.second});
    }
  }
  std::ostringstream o;
  o << html::page_head("Record sweeps over time")
    << "<p><a href=\"index.html\">&larr; all sweeps and benchmarks</a></p>\n<h1>Record sweeps over time</h1>\n";
  if (losses.rows.empty()) {
    o << "<p>No record or import sweep has finished runs.</p>\n";
  } else {
    o << "<figure>" << html::render_dot_plot(losses) << "</figure>\n<figure>" << html::render_dot_plot(times)
      << "</figure>\n";
  }
  o << "</body>\n</html>\n";
  return o.str();
}

}  // namespace

std::string page_slug(const std::string& name) {
  std::string slug;
  for (const char c : name.substr(0, 80)) {
    const bool letter_or_digit = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    slug += letter_or_digit || c == '-' || c == '_' ? c : '_';
  }
  return slug + "-" + sha1_hex(name).substr(0, 8);
}

SiteSummary write_site(Store& store, const fs::path& out) {
  SiteSummary summary;
  fs::create_directories(out);
  std::vector<SweepRow> records, comparisons, others;
  std::vector<SweepInfo> record_sweeps;
  for (const auto& sweep : store.sweeps()) {
    if (sweep.kind == "nightly") continue;  // its figures are on the benchmark pages
    SweepRow row = sweep_row(store, sweep, out, summary);
    ++summary.sweeps;
    if (sweep.kind == "compare") {
      comparisons.push_back(std::move(row));
    } else if (sweep.kind == "record" || sweep.kind == "import") {
      record_sweeps.push_back(sweep);
      records.push_back(std::move(row));
    } else {
      others.push_back(std::move(row));
    }
  }
  std::sort(record_sweeps.begin(), record_sweeps.end(), [](const SweepInfo& a, const SweepInfo& b) {
    return std::tie(a.created_at, a.id) < std::tie(b.created_at, b.id);
  });

  // Benchmarks: one page per (suite, name), one chart per GPU model on it.
  std::map<std::pair<std::string, std::string>, std::vector<nightly::Series>> benchmarks;
  for (auto& s : stored_series(store)) benchmarks[{s.suite, s.name}].push_back(std::move(s));
  std::ostringstream bench_rows;
  for (const auto& [key, series] : benchmarks) {
    const std::string title = key.first + "/" + key.second;
    const std::string file = "benchmarks/" + page_slug(title) + ".html";
    write_page(out / file, benchmark_page(store, title, series), summary);
    ++summary.benchmarks;
    std::string gpus;
    size_t open = 0;
    for (const auto& s : series) {
      gpus += (gpus.empty() ? "" : ", ") + (s.gpu.empty() ? std::string("-") : s.gpu);
      // "open" only: a confirmed change point is a settled slower level, no longer waiting for a decision.
      for (const auto& c : load_change_points(store, s.suite, s.name, s.gpu)) open += c.status == "open" ? 1 : 0;
    }
    bench_rows << "<tr><td><a href=\"" << file << "\">" << esc(title) << "</a></td><td>" << esc(gpus)
               << "</td><td class=\"" << (open ? "status-bad" : "status-ok") << "\">" << open << "</td></tr>\n";
  }
  write_page(out / "records.html", records_page(store, record_sweeps), summary);

  std::ostringstream o;
  o << html::page_head("Speedrun results") << "<h1>Speedrun results</h1>\n<p>" << summary.sweeps << " sweep(s), "
    << summary.benchmarks << " benchmark(s). <a href=\"records.html\">Record sweeps over time</a>.</p>\n";
  o << "<h2>Record sweeps and imports</h2>\n";
  sweep_table(o, records);
  o << "<h2>Comparisons</h2>\n";
  sweep_table(o, comparisons);
  if (!others.empty()) {
    o << "<h2>Other sweeps</h2>\n";
    sweep_table(o, others);
  }
  o << "<h2>Benchmarks</h2>\n<table>\n<tr><th>benchmark</th><th>GPU models</th><th>open change points</th></tr>\n"
    << bench_rows.str() << "</table>\n";
  if (!summary.notes.empty()) {
    o << "<h2>Notes</h2>\n<ul>\n";
    for (const auto& n : summary.notes) o << "<li>" << esc(n) << "</li>\n";
    o << "</ul>\n";
  }
  o << "</body>\n</html>\n";
  write_page(out / "index.html", o.str(), summary);
  std::rotate(summary.pages.begin(), summary.pages.end() - 1, summary.pages.end());  // index.html first
  return summary;
}

}  // namespace gpt::harness
