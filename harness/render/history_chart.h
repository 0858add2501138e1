#pragma once
// The history of one benchmark on one GPU model as an inline SVG: one point per night (its mean, a whisker from
// its fastest to its slowest repetition), dates and commits on the x axis (labels thinned until they do not
// touch), the value's unit on the y axis, and change points drawn as dashed lines whose labels link to the night
// that started them. The chart has no title of its own: the page's heading names it, so nothing is clipped.
#include <string>
#include <utility>
#include <vector>

namespace gpt::harness::html {

struct HistoryNight {
  std::string stamp, commit;  // night stamp ("2026-12-05T02:00:11Z") and the commit it measured
  double mean = 0, min = 0, max = 0;
};

struct HistoryMark {
  size_t night = 0;   // index of the first night at the new level
  std::string label;  // e.g. "+6.7% (bad1dea), open"
  std::string href;   // where the label links (the night's row); empty: no link
};

struct HistoryChart {
  std::string value_label;  // e.g. "time per iteration"
  std::string unit;         // the stored unit: "ns" is shown in ns, µs, ms or s; others as they are
  std::vector<HistoryNight> nights;
  std::vector<HistoryMark> marks;
};

// One HistoryNight per night of repetitions (its mean, fastest and slowest); stamps and commits where known.
std::vector<HistoryNight> history_nights(const std::vector<std::vector<double>>& nights,
                                         const std::vector<std::string>& stamps,
                                         const std::vector<std::string>& commits);

// The display unit of values stored in `unit` whose largest is `largest`, and the divisor into it.
std::pair<std::string, double> display_unit(const std::string& unit, double largest);

std::string render_history_chart(const HistoryChart& chart, int width = 1000, int height = 380);

}  // namespace gpt::harness::html
