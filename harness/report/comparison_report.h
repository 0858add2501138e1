#pragma once
// The stored report of a compare sweep: report.md (for PR descriptions) beside report.html, written under
// `<db folder>/reports/<sweep>/` by `harness compare` and again by `harness report --sweep`.
#include <filesystem>
#include <string>

#include "harness/report/html_report.h"
#include "harness/store/store.h"

namespace gpt::harness {

// The settings a compare sweep was run with (target, alpha, --fail-if-slower, the named baseline's published
// figures), from its sweep row and params.
compare::ComparisonSettings stored_comparison_settings(Store& store, const SweepInfo& sweep);

std::string render_comparison_markdown(const ComparisonPage& page, const std::string& reproduce,
                                       const Provenance& provenance = {});

struct ComparisonReportFiles {
  std::filesystem::path markdown, html;
};
ComparisonReportFiles write_comparison_reports(Store& store, const SweepInfo& sweep, const ComparisonPage& page,
                                               const std::filesystem::path& dir);

}  // namespace gpt::harness
