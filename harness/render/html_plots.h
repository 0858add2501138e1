#pragma once
// Inline SVG plots for the HTML reports, laid out to stay readable with many arms: one row per arm in dot
// plots (the figure grows instead of labels colliding), a legend that wraps into rows, tick labels thinned
// until they do not touch, and log axes where the values span orders of magnitude.
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpt::harness::html {

// Width in pixels of `text` at the plots' 12 px sans-serif font (a conservative average glyph width).
double text_width(const std::string& text);

// A log axis is used when every value is positive and the largest is at least 30x the smallest.
bool wants_log_axis(double lo, double hi);

// An axis mapping data values to pixels [pixel_lo, pixel_hi], linear or log10, with its tick values.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  double pixel_lo = 0, pixel_hi = 1;
  double to_pixel(double value) const;
  std::vector<double> ticks(int count) const;
};
Axis make_axis(double lo, double hi, double pixel_lo, double pixel_hi);  // log by wants_log_axis

// The ticks of `axis` whose labels fit along a horizontal axis without overlapping (every k-th tick).
std::vector<double> fitting_ticks(const Axis& axis, int wanted);
std::string tick_text(double value);

// One row per arm, one dot per run, a bar at the arm's mean; an optional dashed reference (the target).
struct DotRow {
  std::string label;
  std::vector<double> values;
};
struct DotPlot {
  std::string title, x_label;
  std::vector<DotRow> rows;
  std::optional<double> reference;
  std::string reference_label;
};
std::string render_dot_plot(const DotPlot& plot, int width = 860);

// Curves coloured by group (arm), one line per run; the legend lists groups and wraps.
struct CurveGroup {
  std::string label;
  std::vector<std::vector<std::pair<double, double>>> runs;
};
struct CurvePlot {
  std::string title, x_label, y_label;
  std::vector<CurveGroup> groups;
  std::optional<double> y_reference;
};
std::string render_curve_plot(const CurvePlot& plot, int width = 860, int height = 420);

}  // namespace gpt::harness::html
