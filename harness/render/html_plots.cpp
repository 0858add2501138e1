#include "harness/render/html_plots.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "harness/render/svg.h"

namespace gpt::harness::html {

namespace {

// 24 colours that stay distinguishable on white; groups beyond that reuse them with a dash pattern.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                                    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939",
                                    "#8c6d31", "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354",
                                    "#756bb1", "#636363", "#9c9ede", "#cedb9c", "#e7ba52", "#ad494a"};
constexpr int kPaletteSize = static_cast<int>(std::size(kPalette));
constexpr double kFontPx = 12;

std::string px(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

// Shortens a label to `max_px` with an ellipsis; the full text stays in a <title> tooltip.
std::string fit_label(const std::string& text, double max_px) {
  if (text_width(text) <= max_px) return text;
  std::string out = text;
  while (!out.empty() && text_width(out + "...") > max_px) out.pop_back();
  return out + "...";
}

void finite_range(double v, double& lo, double& hi) {
  if (!std::isfinite(v)) return;
  lo = std::min(lo, v);
  hi = std::max(hi, v);
}

void pad_range(double& lo, double& hi, bool log) {
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (log) {
    lo /= 1.15, hi *= 1.15;
    return;
  }
  if (!(hi > lo)) {
    const double pad = std::abs(lo) > 0 ? std::abs(lo) * 0.02 : 1.0;
    lo -= pad, hi += pad;
  } else {
    const double pad = (hi - lo) * 0.05;
    lo -= pad, hi += pad;
  }
}

void open_svg(std::ostringstream& o, int width, int height, const std::string& title) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << width << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n<title>"
    << svg::escape(title) << "</title>\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"" << width / 2
    << "\" y=\"20\" text-anchor=\"middle\" font-size=\"15\">" << svg::escape(title) << "</text>\n";
}

void x_axis(std::ostringstream& o, const Axis& axis, double y, double grid_top, const std::string& label,
            double label_x) {
  for (const double t : fitting_ticks(axis, 8)) {
    const double x = axis.to_pixel(t);
    o << "<line x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << px(grid_top) << "\" y2=\"" << px(y)
      << "\" stroke=\"#e4e4e4\"/>\n<text class=\"xtick\" x=\"" << px(x) << "\" y=\"" << px(y + 16)
      << "\" text-anchor=\"middle\">" << tick_text(t) << "</text>\n";
  }
  o << "<line x1=\"" << px(axis.pixel_lo) << "\" x2=\"" << px(axis.pixel_hi) << "\" y1=\"" << px(y) << "\" y2=\""
    << px(y) << "\" stroke=\"black\"/>\n<text x=\"" << px(label_x) << "\" y=\"" << px(y + 36)
    << "\" text-anchor=\"middle\">" << svg::escape(label + (axis.log ? " (log scale)" : "")) << "</text>\n";
}

}  // namespace

double text_width(const std::string& text) {
  std::size_t glyphs = 0;
  for (const unsigned char c : text) glyphs += (c & 0xC0) != 0x80;  // count UTF-8 code points
  return static_cast<double>(glyphs) * kFontPx * 0.62;
}

bool wants_log_axis(double lo, double hi) { return lo > 0 && std::isfinite(hi) && hi / lo >= 30; }

double Axis::to_pixel(double value) const {
  const double a = log ? std::log10(lo) : lo, b = log ? std::log10(hi) : hi;
  const double v = log ? std::log10(std::max(value, lo)) : value;
  return pixel_lo + (v - a) / (b - a) * (pixel_hi - pixel_lo);
}

std::vector<double> Axis::ticks(int count) const {
  if (!log) {
    std::vector<double> out;
    for (const double t : svg::nice_ticks(lo, hi, count)) {
      if (t >= lo - 1e-12 * std::abs(hi - lo) && t <= hi + 1e-12 * std::abs(hi - lo)) out.push_back(t);
    }
    return out;
  }
  // Decades, with 2 and 5 in between while the axis spans few decades.
  const int first = static_cast<int>(std::floor(std::log10(lo))), last = static_cast<int>(std::ceil(std::log10(hi)));
  const bool minor = last - first <= 3;
  std::vector<double> out;
  for (int e = first; e <= last; ++e) {
    for (const double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && !minor) continue;
      const double t = m * std::pow(10.0, e);
      if (t >= lo && t <= hi) out.push_back(t);
    }
  }
  return out;
}

Axis make_axis(double lo, double hi, double pixel_lo, double pixel_hi) {
  Axis axis;
  axis.log = wants_log_axis(lo, hi);
  pad_range(lo, hi, axis.log);
  axis.lo = lo, axis.hi = hi, axis.pixel_lo = pixel_lo, axis.pixel_hi = pixel_hi;
  return axis;
}

std::string tick_text(double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(value) < 1e-12 ? 0.0 : value);
  return buf;
}

std::vector<double> fitting_ticks(const Axis& axis, int wanted) {
  const std::vector<double> all = axis.ticks(wanted);
  for (std::size_t stride = 1; stride <= std::max<std::size_t>(1, all.size()); ++stride) {
    std::vector<double> kept;
    for (std::size_t i = 0; i < all.size(); i += stride) kept.push_back(all[i]);
    bool fits = true;
    for (std::size_t i = 1; i < kept.size() && fits; ++i) {
      const double gap = std::abs(axis.to_pixel(kept[i]) - axis.to_pixel(kept[i - 1]));
      fits = gap >= (text_width(tick_text(kept[i])) + text_width(tick_text(kept[i - 1]))) / 2 + 8;
    }
    if (fits) return kept;
  }
  return all.empty() ? all : std::vector<double>{all.front()};
}

std::string render_dot_plot(const DotPlot& plot, int width) {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  double longest = 0;
  for (const auto& row : plot.rows) {
    for (const double v : row.values) finite_range(v, lo, hi);
    longest = std::max(longest, text_width(row.label));
  }
  if (plot.reference) finite_range(*plot.reference, lo, hi);
  constexpr double kRowHeight = 22, kTop = 34, kBottom = 50, kRight = 24;
  const double left = std::clamp(longest + 16, 60.0, width * 0.35);
  const int height = static_cast<int>(kTop + kBottom + kRowHeight * std::max<std::size_t>(1, plot.rows.size()));
  const Axis axis = make_axis(lo, hi, left, width - kRight);
  const double axis_y = height - kBottom;
  std::ostringstream o;
  open_svg(o, width, height, plot.title);
  x_axis(o, axis, axis_y, kTop, plot.x_label, (left + width - kRight) / 2);
  for (std::size_t i = 0; i < plot.rows.size(); ++i) {
    const auto& row = plot.rows[i];
    const double y = kTop + kRowHeight * (static_cast<double>(i) + 0.5);
    const char* color = kPalette[i % kPaletteSize];
    o << "<text class=\"rowlabel\" x=\"" << px(left - 8) << "\" y=\"" << px(y + 4) << "\" text-anchor=\"end\"><title>"
      << svg::escape(row.label) << "</title>" << svg::escape(fit_label(row.label, left - 16)) << "</text>\n";
    if (i % 2 == 1) {
      o << "<rect x=\"" << px(left) << "\" y=\"" << px(y - kRowHeight / 2) << "\" width=\"" << px(width - kRight - left)
        << "\" height=\"" << px(kRowHeight) << "\" fill=\"#f6f6f6\"/>\n";
    }
    double sum = 0;
    int n = 0;
    for (const double v : row.values) {
      if (!std::isfinite(v)) continue;
      sum += v, ++n;
      o << "<circle cx=\"" << px(axis.to_pixel(v)) << "\" cy=\"" << px(y) << "\" r=\"3.5\" fill=\"" << color
        << "\" fill-opacity=\"0.65\"><title>" << svg::escape(row.label) << ": " << tick_text(v)
        << "</title></circle>\n";
    }
    if (n > 0) {
      const double mx = axis.to_pixel(sum / n);
      o << "<line x1=\"" << px(mx) << "\" x2=\"" << px(mx) << "\" y1=\"" << px(y - 8) << "\" y2=\"" << px(y + 8)
        << "\" stroke=\"black\" stroke-width=\"2\"/>\n";
    }
  }
  if (plot.reference && std::isfinite(*plot.reference)) {
    const double x = axis.to_pixel(*plot.reference);
    o << "<line x1=\"" << px(x) << "\" x2=\"" << px(x) << "\" y1=\"" << px(kTop) << "\" y2=\"" << px(axis_y)
      << "\" stroke=\"#b00\" stroke-dasharray=\"6,4\"><title>" << svg::escape(plot.reference_label)
      << "</title></line>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string render_curve_plot(const CurvePlot& plot, int width, int height) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& g : plot.groups) {
    for (const auto& run : g.runs) {
      for (const auto& [x, y] : run) {
        if (!std::isfinite(x) || !std::isfinite(y)) continue;
        finite_range(x, x0, x1);
        finite_range(y, y0, y1);
      }
    }
  }
  if (plot.y_reference && std::isfinite(y0)) finite_range(*plot.y_reference, y0, y1);
  // The legend wraps into rows below the plot; its height adds to the figure's.
  constexpr double kLeft = 70, kRight = 24, kTop = 34, kLegendRow = 18;
  double column = 0;
  for (const auto& g : plot.groups) column = std::max(column, text_width(g.label) + 30);
  column = std::min(column, static_cast<double>(width) - kLeft - kRight);
  const int per_row = std::max(1, static_cast<int>((width - kLeft - kRight) / std::max(column, 1.0)));
  const int legend_rows = plot.groups.size() > 1 ? static_cast<int>((plot.groups.size() + per_row - 1) / per_row) : 0;
  const double plot_bottom = height - 50;
  const int total_height = height + static_cast<int>(legend_rows * kLegendRow) + (legend_rows ? 8 : 0);
  const Axis x_axis_def = make_axis(x0, x1, kLeft, width - kRight);
  Axis y_axis_def = make_axis(y0, y1, plot_bottom, kTop);
  std::ostringstream o;
  open_svg(o, width, total_height, plot.title);
  for (const double t : y_axis_def.ticks(6)) {
    const double y = y_axis_def.to_pixel(t);
    o << "<line x1=\"" << px(kLeft) << "\" x2=\"" << px(width - kRight) << "\" y1=\"" << px(y) << "\" y2=\"" << px(y)
      << "\" stroke=\"#e4e4e4\"/>\n<text class=\"ytick\" x=\"" << px(kLeft - 6) << "\" y=\"" << px(y + 4)
      << "\" text-anchor=\"end\">" << tick_text(t) << "</text>\n";
  }
  o << "<text transform=\"translate(16," << px((kTop + plot_bottom) / 2) << ") rotate(-90)\" text-anchor=\"middle\">"
    << svg::escape(plot.y_label + (y_axis_def.log ? " (log scale)" : "")) << "</text>\n<line x1=\"" << px(kLeft)
    << "\" x2=\"" << px(kLeft) << "\" y1=\"" << px(kTop) << "\" y2=\"" << px(plot_bottom) << "\" stroke=\"black\"/>\n";
  x_axis(o, x_axis_def, plot_bottom, kTop, plot.x_label, (kLeft + width - kRight) / 2);
  if (plot.y_reference && std::isfinite(*plot.y_reference)) {
    const double y = y_axis_def.to_pixel(*plot.y_reference);
    o << "<line x1=\"" << px(kLeft) << "\" x2=\"" << px(width - kRight) << "\" y1=\"" << px(y) << "\" y2=\"" << px(y)
      << "\" stroke=\"black\" stroke-dasharray=\"6,4\"/>\n";
  }
  for (std::size_t gi = 0; gi < plot.groups.size(); ++gi) {
    const char* color = kPalette[gi % kPaletteSize];
    const bool dashed = gi / kPaletteSize % 2 == 1;
    for (const auto& run : plot.groups[gi].runs) {
      o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.3\" stroke-opacity=\"0.8\""
        << (dashed ? " stroke-dasharray=\"5,3\"" : "") << " points=\"";
      for (const auto& [x, y] : run) {
        if (std::isfinite(x) && std::isfinite(y))
          o << px(x_axis_def.to_pixel(x)) << "," << px(y_axis_def.to_pixel(y)) << " ";
      }
      o << "\"><title>" << svg::escape(plot.groups[gi].label) << "</title></polyline>\n";
    }
  }
  for (int gi = 0; legend_rows > 0 && gi < static_cast<int>(plot.groups.size()); ++gi) {
    const double lx = kLeft + (gi % per_row) * column;
    const double ly = height + 4 + (gi / per_row) * kLegendRow;
    o << "<line x1=\"" << px(lx) << "\" x2=\"" << px(lx + 20) << "\" y1=\"" << px(ly - 4) << "\" y2=\"" << px(ly - 4)
      << "\" stroke=\"" << kPalette[gi % kPaletteSize] << "\" stroke-width=\"3\""
      << (gi / kPaletteSize % 2 == 1 ? " stroke-dasharray=\"5,3\"" : "") << "/>\n<text class=\"legend\" x=\""
      << px(lx + 26) << "\" y=\"" << px(ly) << "\"><title>" << svg::escape(plot.groups[gi].label) << "</title>"
      << svg::escape(fit_label(plot.groups[gi].label, column - 30)) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace gpt::harness::html
