// What one traced training step did on the GPU: the activity intervals (kernels, copies, memsets) that
// trainer/bench/kernel_trace.h records, summed per name and merged into busy time, so that the step's event-timed
// length splits into GPU work and GPU idle (the host launching, synchronising or computing while the GPU waits).
// Header-only and free of CUDA so that the CPU suite tests the arithmetic (tests/bench/kernel_timeline_test.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpt {

enum class ActivityKind { kernel, memcpy, memset };

struct ActivityInterval {
  ActivityKind kind = ActivityKind::kernel;
  std::string name;  // demangled kernel name, or "[memcpy HtoD]" etc.
  uint64_t start_ns = 0, end_ns = 0;
};

struct NameTotal {
  std::string name;
  double ms = 0;
  int64_t count = 0;
};

// An idle stretch between two pieces of GPU work, with what ran on either side (where the host stalled).
struct IdleGap {
  double us = 0;
  std::string before, after;
};

struct TimelineSummary {
  int64_t kernels = 0, copies = 0, memsets = 0;
  double activity_ms = 0;  // Σ durations (overlapping activities counted twice)
  double busy_ms = 0;      // union of the intervals: time with some GPU work in flight
  double span_ms = 0;      // first start to last end
  double idle_in_span_ms = 0;
  int64_t idle_gaps_over_threshold = 0;  // gaps ≥ gap_threshold_us inside the span
  double idle_over_threshold_ms = 0;     // their sum
  std::vector<NameTotal> top;            // by total time, longest first
  std::vector<IdleGap> longest_gaps;     // longest first
};

// Summarises intervals in any order; top_n names, longest_gaps_n gaps. Intervals with end < start are a recorder
// fault and are rejected.
inline TimelineSummary summarize_timeline(std::vector<ActivityInterval> intervals, size_t top_n = 30,
                                          size_t longest_gaps_n = 10, double gap_threshold_us = 5.0) {
  TimelineSummary s;
  std::map<std::string, NameTotal> by_name;
  for (const ActivityInterval& a : intervals) {
    if (a.end_ns < a.start_ns)
      throw std::invalid_argument("kernel timeline: an interval of '" + a.name + "' ends before it starts");
    const double ms = static_cast<double>(a.end_ns - a.start_ns) * 1e-6;
    s.activity_ms += ms;
    NameTotal& t = by_name[a.name];
    t.name = a.name;
    t.ms += ms;
    ++t.count;
    switch (a.kind) {
      case ActivityKind::kernel:
        ++s.kernels;
        break;
      case ActivityKind::memcpy:
        ++s.copies;
        break;
      case ActivityKind::memset:
        ++s.memsets;
        break;
    }
  }
  for (auto& [name, total] : by_name) s.top.push_back(total);
  std::stable_sort(s.top.begin(), s.top.end(), [](const NameTotal& a, const NameTotal& b) { return a.ms > b.ms; });
  if (s.top.size() > top_n) s.top.resize(top_n);
  if (intervals.empty()) return s;

  std::stable_sort(intervals.begin(), intervals.end(),
                   [](const ActivityInterval& a, const ActivityInterval& b) { return a.start_ns < b.start_ns; });
  uint64_t busy_ns = 0;
  uint64_t run_start = intervals.front().start_ns, run_end = intervals.front().end_ns;
  std::string run_last = intervals.front().name;  // the activity that ends the current busy run
  std::vector<IdleGap> gaps;
  for (size_t i = 1; i < intervals.size(); ++i) {
    const ActivityInterval& a = intervals[i];
    if (a.start_ns > run_end) {
      busy_ns += run_end - run_start;
      const double gap_us = static_cast<double>(a.start_ns - run_end) * 1e-3;
      s.idle_in_span_ms += gap_us * 1e-3;
      if (gap_us >= gap_threshold_us) {
        ++s.idle_gaps_over_threshold;
        s.idle_over_threshold_ms += gap_us * 1e-3;
      }
      gaps.push_back({gap_us, run_last, a.name});
      run_start = a.start_ns;
      run_end = a.end_ns;
      run_last = a.name;
    } else if (a.end_ns >= run_end) {
      run_end = a.end_ns;
      run_last = a.name;
    }
  }
  busy_ns += run_end - run_start;
  s.busy_ms = static_cast<double>(busy_ns) * 1e-6;
  s.span_ms = static_cast<double>(run_end - intervals.front().start_ns) * 1e-6;
  std::stable_sort(gaps.begin(), gaps.end(), [](const IdleGap& a, const IdleGap& b) { return a.us > b.us; });
  if (gaps.size() > longest_gaps_n) gaps.resize(longest_gaps_n);
  s.longest_gaps = std::move(gaps);
  return s;
}

}  // namespace gpt
