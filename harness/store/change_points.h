#pragma once
// The store's table of change points the nightly job reported (schema v2, `change_points`), tracked from the night
// they were found (nightly/change_point_tracking.h). Nights are night stamps (benchmark_results.recorded_at);
// commits are the ones those nights measured.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/store/store.h"

namespace gpt::harness {

struct ChangePointRecord {
  std::int64_t id = 0;  // 0 until stored
  std::string suite, name, gpu;
  std::string start_night, start_commit;  // the first night at the slower level
  std::string found_night, found_commit;  // the night it was reported on
  double before_mean = 0, relative = 0, min_effect = 0;
  std::string status = "open";  // open | confirmed | resolved
  std::string resolved_night;   // "" unless resolved
};

// Tracked change points of one benchmark on one GPU model, oldest start first (every one when `suite` is empty).
std::vector<ChangePointRecord> load_change_points(Store& store, std::string_view suite = {}, std::string_view name = {},
                                                  std::string_view gpu = {});
// Inserts a new record (id 0) or updates the stored one's relative change and status; returns its id.
std::int64_t save_change_point(Store& store, const ChangePointRecord& record);

}  // namespace gpt::harness
