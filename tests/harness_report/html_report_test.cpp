// HTML reports: self-contained pages (no scripts, no external resources), plots that stay readable with many
// arms (one row per arm, log axes over wide ranges, tick labels that do not touch), and a render in headless
// Chromium that must produce a non-empty screenshot without console errors. The browser tests skip, with
// the reason, when chromium is not installed.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "harness/render/html_plots.h"
#include "harness/report/html_report.h"
#include "harness/store/store.h"
#include "tests/harness/temp_dir.h"
#include "tests/harness_report/browser.h"

namespace gpt::harness {
namespace {

using testing::TempDir;
using namespace browser;

// A sweep with `arms` arms of 4 runs whose train times span three orders of magnitude.
SweepInfo make_sweep(Store& store, int arms) {
  Environment env;
  env.gpu = "8x H100 80GB HBM3";
  env.compiler = "g++ 12.2";
  env.git_commit = "0123456789abcdef";
  SweepInfo sweep;
  sweep.name = "many-arms";
  sweep.kind = "record";
  sweep.recipe = "tiny";
  sweep.command = R"(["/bin/train_gpt","--seed","{seed}","--out","{out}"])";
  sweep.target = 3.28;
  sweep.alpha = 0.01;
  sweep.runs_planned = arms * 4;
  sweep.environment_id = store.upsert_environment(env);
  sweep.id = store.create_sweep(sweep);
  for (int a = 0; a < arms; ++a) {
    for (int s = 0; s < 4; ++s) {
      RunRecord r;
      r.sweep_id = sweep.id;
      r.arm = "arm-" + std::to_string(a) + (a == 3 ? "-with-a-very-long-descriptive-name-that-would-not-fit" : "");
      r.seed = s;
      r.run_id = r.arm + "-seed" + std::to_string(s);
      r.status = (a == 1 && s == 3) ? RunStatus::diverged : RunStatus::ok;
      if (r.status == RunStatus::ok) {
        r.final_val_loss = 3.27 + 0.002 * a + 0.001 * s;
        r.train_time_ms = 150.0 * std::pow(10.0, 3.0 * a / std::max(1, arms - 1)) * (1 + 0.01 * s);
        for (int step = 0; step <= 100; step += 25) r.val_points.push_back({step, 10.8 - step * 0.075 + 0.01 * a, {}});
      } else {
        r.reason = "non-finite loss <at> step 40 & \"quoted\"";
      }
      store.add_run(r);
    }
  }
  return *store.find_sweep("many-arms");
}

// Text elements of one class: (x, y, text).
struct Label {
  double x, y;
  std::string text;
};
std::vector<Label> labels(const std::string& svg, const std::string& css_class) {
  std::vector<Label> out;
  const std::string open = "<text class=\"" + css_class + "\" x=\"";
  for (std::size_t at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    Label label{};
    std::size_t pos = at + open.size();
    label.x = std::stod(svg.substr(pos));
    pos = svg.find("y=\"", pos) + 3;
    label.y = std::stod(svg.substr(pos));
    pos = svg.find('>', pos) + 1;
    if (svg.compare(pos, 7, "<title>") == 0) pos = svg.find("</title>", pos) + 8;
    label.text = svg.substr(pos, svg.find('<', pos) - pos);
    out.push_back(label);
  }
  return out;
}

TEST(HtmlPlots, LogAxisOnlyOverOrdersOfMagnitude) {
  EXPECT_TRUE(html::wants_log_axis(100, 150000));
  EXPECT_FALSE(html::wants_log_axis(3.2, 3.3));
  EXPECT_FALSE(html::wants_log_axis(-1, 1000));  // not all positive
  const auto axis = html::make_axis(100, 150000, 0, 800);
  EXPECT_TRUE(axis.log);
  const auto ticks = axis.ticks(8);
  EXPECT_NE(std::find(ticks.begin(), ticks.end(), 1000.0), ticks.end());
  EXPECT_NEAR(axis.to_pixel(1000) - axis.to_pixel(100), axis.to_pixel(10000) - axis.to_pixel(1000), 1e-9);
}

TEST(HtmlPlots, ManyArmsGetRowsAndLabelsThatDoNotOverlap) {
  html::DotPlot plot{"train time", "ms", {}, std::nullopt, ""};
  for (int a = 0; a < 60; ++a)
    plot.rows.push_back({"arm number " + std::to_string(a), {100.0 * (a + 1), 120.0 * (a + 1)}});
  const std::string svg = html::render_dot_plot(plot, 700);
  const auto rows = labels(svg, "rowlabel");
  ASSERT_EQ(rows.size(), 60u);
  for (std::size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i].y - rows[i - 1].y, 14.0) << i;
  const auto ticks = labels(svg, "xtick");
  ASSERT_GE(ticks.size(), 2u);
  for (std::size_t i = 1; i < ticks.size(); ++i) {
    const double gap = ticks[i].x - ticks[i - 1].x;
    EXPECT_GT(gap, (html::text_width(ticks[i].text) + html::text_width(ticks[i - 1].text)) / 2) << ticks[i].text;
  }
  EXPECT_NE(svg.find("(log scale)"), std::string::npos);  // 100 .. 7200 spans more than 30x
}

TEST(HtmlPlots, TickLabelsAreThinnedOnNarrowAxes) {
  const auto axis = html::make_axis(0.000123, 0.000987, 0, 120);  // long labels, little room
  const auto kept = html::fitting_ticks(axis, 10);
  ASSERT_FALSE(kept.empty());
  for (std::size_t i = 1; i < kept.size(); ++i) {
    EXPECT_GE(axis.to_pixel(kept[i]) - axis.to_pixel(kept[i - 1]),
              (html::text_width(html::tick_text(kept[i])) + html::text_width(html::tick_text(kept[i - 1]))) / 2);
  }
  EXPECT_LT(kept.size(), axis.ticks(10).size());
}

TEST(HtmlPlots, LegendWrapsIntoRows) {
  html::CurvePlot plot{"curves", "step", "loss", {}, std::nullopt};
  for (int g = 0; g < 30; ++g) plot.groups.push_back({"group " + std::to_string(g), {{{0, 10}, {100, 3.3}}}});
  const std::string svg = html::render_curve_plot(plot, 700, 400);
  const auto legend = labels(svg, "legend");
  ASSERT_EQ(legend.size(), 30u);
  for (std::size_t i = 0; i < legend.size(); ++i) {
    for (std::size_t j = i + 1; j < legend.size(); ++j) {
      const bool same_row = std::abs(legend[i].y - legend[j].y) < 14;
      if (same_row) {
        EXPECT_GE(std::abs(legend[i].x - legend[j].x), html::text_width(legend[i].text)) << i << " " << j;
      }
    }
  }
}

TEST(HtmlReport, SweepPageIsSelfContained) {
  TempDir dir;
  Store store = Store::open(dir / "db.sqlite");
  const SweepInfo sweep = make_sweep(store, 12);
  const auto report = build_sweep_report(store, sweep, ReportOptions{3.28, 0.01, false});
  const auto path = write_sweep_html(store, report, dir / "out");
  const std::string html = read_file(path);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* forbidden : {"<script", "<link", " src=", "href=", "https://", "url("}) {
    EXPECT_EQ(html.find(forbidden), std::string::npos) << forbidden;
  }
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("Power analysis"), std::string::npos);
  EXPECT_NE(html.find("8x H100 80GB HBM3"), std::string::npos);  // environment
  // The reproduce command names the database it stores into.
  EXPECT_NE(html.find("harness --db "), std::string::npos);
  EXPECT_NE(html.find(" record --runs 48 --recipe tiny"), std::string::npos);
  EXPECT_NE(html.find("&lt;at&gt; step 40 &amp; &quot;quoted&quot;"), std::string::npos);  // escaped reason
  EXPECT_NE(html.find("(log scale)"), std::string::npos);
  EXPECT_NE(html.find("class=\"verdict"), std::string::npos);
}

TEST(HtmlReport, ReproduceCommandQuotesArguments) {
  SweepInfo sweep;
  sweep.kind = "record";
  sweep.recipe = "tiny";
  sweep.runs_planned = 4;
  sweep.command = R"(["/my dir/train_gpt","--seed","{seed}"])";
  const auto cmd = reproduce_command(sweep, {{"launcher", "slurm"}, {"data", "data/default"}, {"first_seed", "0"}});
  EXPECT_EQ(cmd,
            "harness record --runs 4 --recipe tiny --data data/default --launcher slurm -- '/my dir/train_gpt' "
            "--seed {seed}");
  sweep.kind = "import";
  EXPECT_EQ(reproduce_command(sweep, {}), "");
}

TEST(HtmlBrowser, ConsoleErrorsAreDetected) {
  if (!have_chromium()) GTEST_SKIP() << "chromium is not installed (Debian package `chromium`)";
  TempDir dir;
  const auto run =
      render(dir, "broken", "<!DOCTYPE html><html><body><p>x</p><script>missing_function();</script></body></html>");
  ASSERT_FALSE(run.console.empty()) << "the console check would miss errors; chromium said:\n" << run.stderr_text;
  EXPECT_NE(run.console[0].find("missing_function"), std::string::npos) << run.console[0];
}

TEST(HtmlBrowser, SweepReportRendersWithoutConsoleErrors) {
  if (!have_chromium()) GTEST_SKIP() << "chromium is not installed (Debian package `chromium`)";
  TempDir dir;
  Store store = Store::open(dir / "db.sqlite");
  const SweepInfo sweep = make_sweep(store, 24);
  const auto report = build_sweep_report(store, sweep, ReportOptions{3.28, 0.01, false});
  const auto run = render(dir, "sweep", read_file(write_sweep_html(store, report, dir / "out")));
  EXPECT_TRUE(run.console.empty()) << run.console.front();
  expect_png(run.png, "sweep report");
}

TEST(HtmlBrowser, ComparisonReportRendersWithoutConsoleErrors) {
  if (!have_chromium()) GTEST_SKIP() << "chromium is not installed (Debian package `chromium`)";
  TempDir dir;
  Store store = Store::open(dir / "db.sqlite");
  SweepInfo sweep;
  sweep.name = "cmp";
  sweep.kind = "compare";
  sweep.runs_planned = 8;  // 4 per arm
  sweep.id = store.create_sweep(sweep);
  store.set_param(OwnerKind::sweep, sweep.id, "baseline", "main");
  store.set_param(OwnerKind::sweep, sweep.id, "candidate", "feature");
  for (const char* arm : {"baseline", "candidate"}) {
    for (int s = 0; s < 4; ++s) {
      RunRecord r;
      r.sweep_id = sweep.id;
      r.arm = arm;
      r.seed = s;
      r.run_id = std::string(arm) + "-seed" + std::to_string(s);
      r.status = RunStatus::ok;
      r.final_val_loss = 3.275 + 0.001 * s;
      r.train_time_ms = (std::string(arm) == "baseline" ? 180000.0 : 171000.0) + 500.0 * s;
      store.add_run(r);
    }
  }
  const auto stored = *store.find_sweep("cmp");
  const auto page = comparison_page_from_store(store, stored, compare::ComparisonSettings{});
  EXPECT_TRUE(page.report.faster);
  const std::string html = read_file(write_comparison_html(store, stored, page, dir / "out"));
  EXPECT_NE(html.find("FASTER"), std::string::npos);
  EXPECT_NE(html.find(" compare --baseline main --candidate feature --runs 4"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  const auto run = render(dir, "compare", html);
  EXPECT_TRUE(run.console.empty()) << run.console.front();
  expect_png(run.png, "comparison report");
}

}  // namespace
}  // namespace gpt::harness
