#include "harness/nightly/tracked_night.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <spdlog/spdlog.h>

#include "harness/nightly/change_point_tracking.h"

namespace gpt::harness::nightly {
namespace {

std::optional<size_t> index_of(const std::vector<std::string>& stamps, size_t count, const std::string& stamp) {
  const auto end = stamps.begin() + static_cast<std::ptrdiff_t>(count);
  const auto it = std::find(stamps.begin(), end, stamp);
  if (it == end) return std::nullopt;
  return static_cast<size_t>(it - stamps.begin());
}

// The stored records of a series as history indices, as they stood on night `newest` (later ones left out).
std::vector<TrackedChangePoint> as_tracked(const std::vector<ChangePointRecord>& records, const SeriesHistory& s,
                                           size_t newest, std::vector<size_t>& record_of) {
  std::vector<TrackedChangePoint> tracked;
  for (size_t i = 0; i < records.size(); ++i) {
    const ChangePointRecord& r = records[i];
    const auto start = index_of(s.history.night_stamps, newest + 1, r.start_night);
    const auto found = index_of(s.history.night_stamps, newest + 1, r.found_night);
    if (!start || !found) continue;
    TrackedChangePoint cp{
        *start, *found, r.before_mean, r.relative, r.min_effect, parse_change_point_status(r.status), std::nullopt};
    if (!r.resolved_night.empty()) {
      cp.resolved_night = index_of(s.history.night_stamps, newest + 1, r.resolved_night);
      if (!cp.resolved_night) cp.status = ChangePointStatus::confirmed;  // resolved after this night
    }
    tracked.push_back(cp);
    record_of.push_back(i);
  }
  return tracked;
}

}  // namespace

SeriesHistory load_series(Store& store, const Series& series) {
  SeriesHistory s{series, {series.suite + "/" + series.name + (series.gpu.empty() ? "" : " on " + series.gpu), {}}};
  auto& stamps = s.history.night_stamps;
  for (const BenchmarkResult& r :
       store.benchmark_history(std::string_view(series.suite), series.name, std::string_view(series.gpu))) {
    // A value no parse accepts today (an older harness stored +inf for 1e308 ms) is left out with a warning:
    // kept in, it made every later decision over this series fail.
    if (!std::isfinite(r.value) || r.value < 0 || r.value > kMaxBenchmarkNs) {
      spdlog::warn("nightly: {}: the value stored for night {} is {}, not a time; left out of the history",
                   s.history.name, r.recorded_at, r.value);
      continue;
    }
    if (stamps.empty() || r.recorded_at != stamps.back()) {
      s.history.nights.emplace_back();
      stamps.push_back(r.recorded_at);
      s.history.night_commits.push_back(r.revision);
    }
    s.history.nights.back().push_back(r.value);
  }
  return s;
}

NightDecision decide_nights(Store& store, const std::set<Series>& series, std::vector<std::string> stamps,
                            const RegressionOptions& options) {
  std::vector<SeriesHistory> all;
  for (const Series& s : series) all.push_back(load_series(store, s));
  std::sort(stamps.begin(), stamps.end());
  stamps.erase(std::unique(stamps.begin(), stamps.end()), stamps.end());
  NightDecision d;
  std::map<size_t, size_t> latest_of;  // series -> its entry in d.findings
  for (const std::string& stamp : stamps) {
    struct Member {
      size_t series, newest;
      std::vector<ChangePointRecord> records;
      std::vector<size_t> record_of;
      std::vector<TrackedChangePoint> tracked;
    };
    std::vector<Member> members;
    std::vector<BenchmarkHistory> histories;
    for (size_t i = 0; i < all.size(); ++i) {
      const auto newest = index_of(all[i].history.night_stamps, all[i].history.night_stamps.size(), stamp);
      if (!newest) continue;
      const Series& s = all[i].series;
      Member m{i, *newest, load_change_points(store, s.suite, s.name, s.gpu), {}, {}};
      m.tracked = as_tracked(m.records, all[i], m.newest, m.record_of);
      BenchmarkHistory h = all[i].history;
      h.nights.resize(m.newest + 1);
      h.night_stamps.resize(m.newest + 1);
      h.night_commits.resize(m.newest + 1);
      h.level_start = level_start(m.tracked);
      histories.push_back(std::move(h));
      members.push_back(std::move(m));
    }
    if (members.empty()) continue;
    const std::vector<RegressionFinding> findings = detect_regressions(histories, options);
    for (size_t j = 0; j < members.size(); ++j) {
      Member& m = members[j];
      const SeriesHistory& s = all[m.series];
      const bool added = track_change_points(m.tracked, histories[j], findings[j]);
      for (size_t t = 0; t < m.record_of.size(); ++t) {  // earlier change points moved on
        ChangePointRecord r = m.records[m.record_of[t]];
        const TrackedChangePoint& cp = m.tracked[t];
        const std::string status(to_string(cp.status));
        const std::string resolved = cp.resolved_night ? s.history.night_stamps[*cp.resolved_night] : "";
        if (status == r.status && resolved == r.resolved_night && cp.relative == r.relative) continue;
        r.status = status;
        r.resolved_night = resolved;
        r.relative = cp.relative;
        save_change_point(store, r);
      }
      if (added) {
        const TrackedChangePoint& cp = m.tracked.back();
        const auto& commits = s.history.night_commits;
        ChangePointRecord r{0,
                            s.series.suite,
                            s.series.name,
                            s.series.gpu,
                            s.history.night_stamps[cp.start_night],
                            commits[cp.start_night],
                            stamp,
                            commits[m.newest],
                            cp.before_mean,
                            cp.relative,
                            cp.min_effect,
                            std::string(to_string(cp.status)),
                            ""};
        r.id = save_change_point(store, r);
        d.found.push_back(std::move(r));
      }
      auto [it, fresh] = latest_of.try_emplace(m.series, d.findings.size());
      if (fresh) {
        d.findings.push_back(findings[j]);
        d.histories.push_back(histories[j]);
      } else {
        d.findings[it->second] = findings[j];
        d.histories[it->second] = histories[j];
      }
      d.newest_commit = s.history.night_commits[m.newest];
    }
  }
  for (const Series& s : series) {
    for (auto& r : load_change_points(store, s.suite, s.name, s.gpu)) d.tracked.push_back(std::move(r));
  }
  return d;
}

}  // namespace gpt::harness::nightly
