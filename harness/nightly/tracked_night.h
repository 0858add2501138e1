#pragma once
// The night's decision over stored histories, with the change points reported before: each night in turn sees
// the nights up to it and the change points tracked before it (change_point_tracking.h); a regression found on a
// night is stored as a new change point (reported that night only), and earlier ones are moved on. Ingesting
// several nights at once replays them oldest first, so every change point is found on its own night.
#include <compare>
#include <set>
#include <string>
#include <vector>

#include "harness/nightly/regression.h"
#include "harness/store/change_points.h"

namespace gpt::harness::nightly {

// One benchmark of a suite on one GPU model ("" where none is named): histories are kept per GPU model.
struct Series {
  std::string suite, name, gpu;
  auto operator<=>(const Series&) const = default;
};

struct SeriesHistory {
  Series series;
  BenchmarkHistory history;  // with each night's stamp and commit
};

// The stored values of `series`, grouped by night stamp, oldest first.
SeriesHistory load_series(Store& store, const Series& series);

struct NightDecision {
  std::vector<RegressionFinding> findings;  // per series, on the newest decided night it was measured
  std::vector<BenchmarkHistory> histories;  // same order (for the plots)
  std::vector<ChangePointRecord> found;     // change points first reported by this decision
  std::vector<ChangePointRecord> tracked;   // every change point of the series, after this decision
  std::string newest_commit;                // the commit of the newest decided night ("" when unknown)
};

// Decides `stamps` (any order; decided oldest first) for every series measured on them, storing the change
// points it finds and moves on.
NightDecision decide_nights(Store& store, const std::set<Series>& series, std::vector<std::string> stamps,
                            const RegressionOptions& options);

}  // namespace gpt::harness::nightly
