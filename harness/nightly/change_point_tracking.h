#pragma once
// The life of a reported slowdown. A confirmed regression is reported once, on the night it is found, and from
// then on is a tracked change point: the nights before it leave the tests (BenchmarkHistory::level_start), so the
// same step is never flagged again on the nights after it, and an unchanged night flags nothing.
//   open      - found tonight or lately;
//   confirmed - the slower level has held for `confirm_nights` nights after the night it was found;
//   resolved  - a later night came back within half the minimum effect of the level before it (a fix or a
//               transient); the tests then compare against the nights from that night on.
// Kept free of I/O: the nightly command stores the records (Store::change_points) and the calibration test
// replays the same bookkeeping night by night.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "harness/nightly/regression.h"

namespace gpt::harness::nightly {

enum class ChangePointStatus { open, confirmed, resolved };
std::string_view to_string(ChangePointStatus status);
ChangePointStatus parse_change_point_status(std::string_view text);  // throws on another word

struct TrackedChangePoint {
  size_t start_night = 0;  // history index of the first night at the slower level
  size_t found_night = 0;  // history index of the night it was reported on
  double before_mean = 0;  // the level before it: mean of the nights of the previous level
  double relative = 0;     // (mean since start − before_mean) / before_mean, updated every night
  double min_effect = 0;   // the benchmark's minimum effect on the night it was found
  ChangePointStatus status = ChangePointStatus::open;
  std::optional<size_t> resolved_night;
};

// The first night of the level tonight's tests compare against (0 when nothing is tracked).
size_t level_start(const std::vector<TrackedChangePoint>& tracked);

inline constexpr size_t kConfirmNights = 2;

// Tonight's bookkeeping for one benchmark, after detect_regressions: earlier change points move on (open ->
// confirmed -> resolved), and a regression found tonight becomes a new open change point. `tracked` is the
// benchmark's list, oldest first, with history indices; `finding` is tonight's finding for `history`.
// Returns true when tonight added a change point (the night's one report of it).
bool track_change_points(std::vector<TrackedChangePoint>& tracked, const BenchmarkHistory& history,
                         const RegressionFinding& finding);

}  // namespace gpt::harness::nightly
