// `harness site`: the static history dashboard. Every page is self-contained (no scripts, no network), every
// link leads to a page of the site, and the pages render in headless Chromium without console errors.
#include <gtest/gtest.h>

#include <limits>

#include "harness/render/history_chart.h"
#include "harness/report/site.h"
#include "harness/store/change_points.h"
#include "tests/harness/temp_dir.h"
#include "tests/harness_report/browser.h"

namespace gpt::harness {
namespace {

using testing::TempDir;
using namespace browser;

void add_record_sweep(Store& store, const std::string& name, double mean) {
  SweepInfo sweep;
  sweep.name = name;
  sweep.kind = "record";
  sweep.recipe = "tiny";
  sweep.target = 7.02;
  sweep.runs_planned = 4;
  sweep.id = store.create_sweep(sweep);
  for (int s = 0; s < 4; ++s) {
    RunRecord r;
    r.sweep_id = sweep.id;
    r.seed = s;
    r.run_id = name + "-seed" + std::to_string(s);
    r.status = RunStatus::ok;
    r.final_val_loss = mean + 0.003 * s;
    r.train_time_ms = 40000 + 500 * s;
    Environment e;
    e.git_commit = "bffc9f5";
    e.build_flags = "RelWithDebInfo";
    r.environment = e;
    store.add_run(r);
  }
}

// Ten nights of a training-step benchmark on an H200 with a step on night 7 (tracked), and three on an H100.
void add_benchmark_history(Store& store) {
  for (const auto& [gpu, nights] : {std::pair<std::string, int>{"NVIDIA H200", 10}, {"NVIDIA H100 80GB HBM3", 3}}) {
    Environment e;
    e.gpu = gpu;
    const auto env = store.upsert_environment(e);
    for (int n = 0; n < nights; ++n) {
      for (int rep = 0; rep < 3; ++rep) {
        BenchmarkResult b;
        b.suite = "train_step_bench";
        b.name = "BM_TrainStep/stage2/fp8:on/data:synthetic";
        b.revision = "c0ffee" + std::to_string(n);
        b.value = (n >= 7 && gpu == "NVIDIA H200" ? 700e6 : 656e6) * (1 + 0.002 * rep);
        b.unit = "ns";
        b.recorded_at = "2026-12-" + std::string(n + 1 < 10 ? "0" : "") + std::to_string(n + 1) + "T12:00:00Z";
        b.environment_id = env;
        store.add_benchmark_result(b);
      }
    }
  }
  save_change_point(store, ChangePointRecord{0, "train_step_bench", "BM_TrainStep/stage2/fp8:on/data:synthetic",
                                             "NVIDIA H200", "2026-12-08T12:00:00Z", "c0ffee7", "2026-12-08T12:00:00Z",
                                             "c0ffee7", 656.6e6, 0.066, 0.02, "confirmed", ""});
}

// The links of the site's pages that lead nowhere (or outside the site); a fragment alone is the page itself.
std::vector<std::string> broken_links(const SiteSummary& site) {
  std::vector<std::string> broken;
  for (const auto& page : site.pages) {
    const std::string html = read_file(page);
    for (size_t at = html.find("href=\""); at != std::string::npos; at = html.find("href=\"", at + 1)) {
      const size_t begin = at + 6, end = html.find('"', begin);
      const std::string link = html.substr(begin, end - begin);
      const std::string target = link.substr(0, link.find('#'));
      if (target.empty()) continue;
      if (target.find("://") != std::string::npos || !std::filesystem::exists(page.parent_path() / target)) {
        broken.push_back(page.filename().string() + " -> " + link);
      }
    }
  }
  return broken;
}

TEST(Site, WritesIndexSweepAndBenchmarkPages) {
  TempDir dir;
  Store store = Store::open(dir / "h.db");
  add_record_sweep(store, "record-tiny-1", 6.97);
  add_record_sweep(store, "record-tiny-2", 6.96);
  add_benchmark_history(store);
  const SiteSummary site = write_site(store, dir / "site");
  ASSERT_FALSE(site.pages.empty());
  EXPECT_EQ(site.pages.front(), dir / "site" / "index.html");
  EXPECT_EQ(site.sweeps, 2u);
  EXPECT_EQ(site.benchmarks, 1u);
  for (const auto& page : site.pages) {
    const std::string html = read_file(page);
    EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u) << page;
    for (const char* forbidden : {"<script", "<link", " src=", "url("}) {
      EXPECT_EQ(html.find(forbidden), std::string::npos) << page << ": " << forbidden;
    }
  }
  EXPECT_TRUE(broken_links(site).empty()) << broken_links(site).front();
  // A page gone missing is caught.
  std::filesystem::remove(dir / "site" / "records.html");
  EXPECT_FALSE(broken_links(site).empty());
  write_site(store, dir / "site");

  const std::string index = read_file(dir / "site" / "index.html");
  EXPECT_NE(index.find("record-tiny-1"), std::string::npos);
  EXPECT_NE(index.find("PASS"), std::string::npos);
  EXPECT_NE(index.find("records.html"), std::string::npos);
  const std::string page =
      "benchmarks/" + page_slug("train_step_bench/BM_TrainStep/stage2/fp8:on/data:synthetic") + ".html";
  EXPECT_NE(index.find(page), std::string::npos) << index;
  const std::string bench = read_file(dir / "site" / page);
  EXPECT_NE(bench.find("<h2>on NVIDIA H200</h2>"), std::string::npos);
  EXPECT_NE(bench.find("<h2>on NVIDIA H100 80GB HBM3</h2>"), std::string::npos);
  EXPECT_NE(bench.find("time per iteration (ms)"), std::string::npos);  // the unit on the axis
  EXPECT_NE(bench.find(">12-08</text>"), std::string::npos);            // dates on the axis
  EXPECT_NE(bench.find(">c0ffee7</text>"), std::string::npos);          // and commits
  EXPECT_NE(bench.find("class=\"change-point\""), std::string::npos);
  EXPECT_NE(bench.find("+6.6% (c0ffee7), confirmed"), std::string::npos);
  // The one change point is confirmed, not open: the index's "open change points" column says 0.
  const size_t cell = index.find("<td class=\"status-", index.find(page));
  ASSERT_NE(cell, std::string::npos) << index;
  EXPECT_EQ(index.substr(cell, 28), "<td class=\"status-ok\">0</td>") << index;
  const std::string records = read_file(dir / "site" / "records.html");
  EXPECT_NE(records.find("record-tiny-2"), std::string::npos);
  EXPECT_NE(records.find("<svg"), std::string::npos);
}

TEST(Site, PageSlugsAreFileSafeAndDistinct) {
  EXPECT_EQ(page_slug("a/b c").substr(0, 6), "a_b_c-");
  EXPECT_NE(page_slug("a/b"), page_slug("a:b"));
  EXPECT_EQ(page_slug("x").find('/'), std::string::npos);
}

TEST(HistoryChart, UnitFollowsTheValuesAndEmptyHistoriesSaySo) {
  EXPECT_EQ(html::display_unit("ns", 684e6).first, "ms");
  EXPECT_EQ(html::display_unit("ns", 2.6e5).first, "µs");
  EXPECT_EQ(html::display_unit("loss", 3.28).first, "loss");
  EXPECT_NE(html::render_history_chart({"time", "ns", {}, {}}).find("no nights stored"), std::string::npos);
}

TEST(SiteBrowser, PagesRenderWithoutConsoleErrors) {
  if (!have_chromium()) GTEST_SKIP() << "chromium is not installed (Debian package `chromium`)";
  TempDir dir;
  Store store = Store::open(dir / "h.db");
  add_record_sweep(store, "record-tiny-1", 6.97);
  add_benchmark_history(store);
  const SiteSummary site = write_site(store, dir / "site");
  for (size_t i = 0; i < site.pages.size(); ++i) {
    const auto run = render_file(dir, "page" + std::to_string(i), site.pages[i]);
    EXPECT_TRUE(run.console.empty()) << site.pages[i] << ": " << run.console.front();
    expect_png(run.png, site.pages[i].string());
  }
}

}  // namespace
}  // namespace gpt::harness

namespace gpt::harness {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The index counts a change point as open only while its status is "open".
TEST(Site, OpenChangePointsCountsOnlyOpenOnes) {
  TempDir dir;
  Store store = Store::open(dir / "h.db");
  add_benchmark_history(store);
  const auto count_cell = [&] {
    write_site(store, dir / "site");
    const std::string index = read_file(dir / "site" / "index.html");
    const std::string page = page_slug("train_step_bench/BM_TrainStep/stage2/fp8:on/data:synthetic");
    const size_t at = index.find("<td class=\"", index.find(page));
    if (at == std::string::npos) return std::string("no row");
    return index.substr(at + 11, index.find("</td>", at) - at - 11);  // e.g. status-ok">0
  };
  EXPECT_EQ(count_cell(), "status-ok\">0");
  save_change_point(store, ChangePointRecord{0, "train_step_bench", "BM_TrainStep/stage2/fp8:on/data:synthetic",
                                             "NVIDIA H100 80GB HBM3", "2026-12-03T12:00:00Z", "c0ffee2",
                                             "2026-12-03T12:00:00Z", "c0ffee2", 656e6, 0.05, 0.02, "open", ""});
  EXPECT_EQ(count_cell(), "status-bad\">1");
  save_change_point(store, ChangePointRecord{0, "train_step_bench", "BM_TrainStep/stage2/fp8:on/data:synthetic",
                                             "NVIDIA H200", "2026-12-01T12:00:00Z", "c0ffee0", "2026-12-01T12:00:00Z",
                                             "c0ffee0", 650e6, 0.01, 0.02, "resolved", "2026-12-02T12:00:00Z"});
  EXPECT_EQ(count_cell(), "status-bad\">1");
}

// A value stored as +inf (an older harness converted 1e308 ms to ns) left the chart without ticks, and
// ticks.front() on the empty vector crashed `harness site`.
TEST(Site, AStoredInfiniteValueDoesNotCrashTheSite) {
  TempDir dir;
  Store store = Store::open(dir / "h.db");
  add_benchmark_history(store);
  store.db().exec(
      "INSERT INTO benchmark_results (suite, name, value, unit, recorded_at) VALUES ('train_step_bench', "
      "'BM_TrainStep/stage2/fp8:on/data:synthetic', 9e999, 'ns', '2026-12-20T12:00:00Z')");
  const SiteSummary site = write_site(store, dir / "site");
  EXPECT_EQ(site.benchmarks, 1u);
  const std::string page =
      "benchmarks/" + page_slug("train_step_bench/BM_TrainStep/stage2/fp8:on/data:synthetic") + ".html";
  EXPECT_NE(read_file(dir / "site" / page).find("<svg"), std::string::npos);
}

TEST(HistoryChart, NonFiniteValuesAreLeftOutOfTheNights) {
  const auto nights = html::history_nights({{kInf}, {1.0, kInf, 3.0}, {}}, {"a", "b", "c"}, {});
  ASSERT_EQ(nights.size(), 1u);  // the night of inf alone has nothing to draw
  EXPECT_EQ(nights[0].stamp, "b");
  EXPECT_DOUBLE_EQ(nights[0].mean, 2.0);
  EXPECT_DOUBLE_EQ(nights[0].max, 3.0);
}

TEST(HistoryChart, ARangeTooWideToScaleSaysSoInsteadOfCrashing) {
  const double huge = std::numeric_limits<double>::max();
  html::HistoryChart chart{"time", "loss", {{"2026-12-01T00:00:00Z", "", huge, -huge, huge}}, {}};
  EXPECT_NE(html::render_history_chart(chart).find("values out of range"), std::string::npos);
}

}  // namespace
}  // namespace gpt::harness
