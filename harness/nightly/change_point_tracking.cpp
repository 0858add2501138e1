#include "harness/nightly/change_point_tracking.h"

#include <cmath>
#include <numeric>

#include "base/check.h"

namespace gpt::harness::nightly {
namespace {

double night_mean(const std::vector<double>& night) {
  return std::accumulate(night.begin(), night.end(), 0.0) / static_cast<double>(night.size());
}

// Mean of the night means of nights [begin, end).
double level_mean(const BenchmarkHistory& h, size_t begin, size_t end) {
  double total = 0;
  for (size_t n = begin; n < end; ++n) total += night_mean(h.nights[n]);
  return total / static_cast<double>(end - begin);
}

}  // namespace

std::string_view to_string(ChangePointStatus status) {
  switch (status) {
    case ChangePointStatus::open:
      return "open";
    case ChangePointStatus::confirmed:
      return "confirmed";
    case ChangePointStatus::resolved:
      return "resolved";
  }
  return "open";
}

ChangePointStatus parse_change_point_status(std::string_view text) {
  if (text == "open") return ChangePointStatus::open;
  if (text == "confirmed") return ChangePointStatus::confirmed;
  if (text == "resolved") return ChangePointStatus::resolved;
  GPT_FAIL("change point status '", text, "' (expected open, confirmed or resolved)");
}

size_t level_start(const std::vector<TrackedChangePoint>& tracked) {
  if (tracked.empty()) return 0;
  const TrackedChangePoint& last = tracked.back();
  return last.status == ChangePointStatus::resolved && last.resolved_night ? *last.resolved_night : last.start_night;
}

bool track_change_points(std::vector<TrackedChangePoint>& tracked, const BenchmarkHistory& h,
                         const RegressionFinding& f) {
  GPT_CHECK(!h.nights.empty(), "nightly: benchmark '", h.name, "' has an empty history");
  const size_t newest = h.nights.size() - 1;
  if (!tracked.empty() && tracked.back().status != ChangePointStatus::resolved) {
    TrackedChangePoint& cp = tracked.back();
    const double base = std::abs(cp.before_mean);
    cp.relative = (level_mean(h, cp.start_night, newest + 1) - cp.before_mean) / base;
    const double tonight = (night_mean(h.nights[newest]) - cp.before_mean) / base;
    if (newest > cp.found_night && tonight < cp.min_effect / 2) {
      cp.status = ChangePointStatus::resolved;
      cp.resolved_night = newest;
    } else if (cp.status == ChangePointStatus::open && newest >= cp.found_night + kConfirmNights) {
      cp.status = ChangePointStatus::confirmed;
    }
  }
  if (!f.regression()) return false;
  const size_t previous_level = std::min(h.level_start, f.regression_start);
  TrackedChangePoint cp;
  cp.start_night = f.regression_start;
  cp.found_night = newest;
  cp.before_mean =
      f.regression_start > previous_level ? level_mean(h, previous_level, f.regression_start) : f.baseline_mean;
  cp.relative = (level_mean(h, cp.start_night, newest + 1) - cp.before_mean) / std::abs(cp.before_mean);
  cp.min_effect = f.min_effect;
  tracked.push_back(cp);
  return true;
}

}  // namespace gpt::harness::nightly
