#pragma once
// `harness site`: the results database as a static, self-contained web site (inline CSS and SVG, no scripts, no
// network), to put behind any web server:
//   index.html               the sweeps and comparisons (verdicts, links to their reports) and the benchmarks;
//   records.html             record and import sweeps' final losses and train times over time;
//   sweeps/<id>/report.html  each sweep's or comparison's report, as `harness report` writes it;
//   benchmarks/<slug>.html   one page per benchmark: its history per GPU model, dates and commits on the axis,
//                            change points marked and linked to the night (and commit) that started them.
#include <filesystem>
#include <string>
#include <vector>

#include "harness/store/store.h"

namespace gpt::harness {

struct SiteSummary {
  std::vector<std::filesystem::path> pages;  // every page written, index.html first
  std::size_t sweeps = 0, benchmarks = 0;
  std::vector<std::string> notes;  // sweeps without a page, and why
};

// Writes the site into `out` (created; pages there are replaced).
SiteSummary write_site(Store& store, const std::filesystem::path& out);

// A file name for `name`: its letters, digits, '-' and '_' (others become '_'), and a short hash of the whole name,
// so names that differ only in other characters never share a page.
std::string page_slug(const std::string& name);

}  // namespace gpt::harness
