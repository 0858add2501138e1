#pragma once
// A small SVG writer for report plots: line charts (val loss curves, one line per run) and strip plots
// (one dot per run per arm, with the arm mean). Text is XML-escaped; axes get "nice" ticks.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpt::harness::svg {

std::string escape(std::string_view text);

// Tick positions covering [lo, hi] with about `count` steps of 1, 2 or 5 × 10^k.
std::vector<double> nice_ticks(double lo, double hi, int count = 5);

struct Series {
  std::string label;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<Series> series;
  std::optional<double> y_reference;  // a dashed horizontal line (the target), if set
  std::string render(int width = 720, int height = 420) const;
};

struct StripGroup {
  std::string label;
  std::vector<double> values;
};

struct StripChart {
  std::string title, y_label;
  std::vector<StripGroup> groups;
  std::string render(int width = 720, int height = 420) const;
};

}  // namespace gpt::harness::svg
