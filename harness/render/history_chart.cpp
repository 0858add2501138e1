#include "harness/render/history_chart.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "harness/render/html_plots.h"
#include "harness/render/svg.h"

namespace gpt::harness::html {
namespace {

constexpr double kLeft = 90, kRight = 24, kTop = 34, kBottom = 62;
constexpr double kLabelWidth = 64;  // a "12-05" / commit label pair, with room between neighbours

std::string num(double v) {
  std::ostringstream o;
  o.precision(6);
  o << v;
  return o.str();
}

}  // namespace

std::vector<HistoryNight> history_nights(const std::vector<std::vector<double>>& nights,
                                         const std::vector<std::string>& stamps,
                                         const std::vector<std::string>& commits) {
  std::vector<HistoryNight> out;
  for (size_t i = 0; i < nights.size(); ++i) {
    // Only finite values can be placed on an axis: a night holding +inf (stored by an older harness) would
    // leave the chart without a scale.
    std::vector<double> values;
    for (double v : nights[i]) {
      if (std::isfinite(v)) values.push_back(v);
    }
    if (values.empty()) continue;
    double total = 0;
    for (double v : values) total += v;
    out.push_back({i < stamps.size() ? stamps[i] : "night " + std::to_string(i), i < commits.size() ? commits[i] : "",
                   total / static_cast<double>(values.size()), *std::min_element(values.begin(), values.end()),
                   *std::max_element(values.begin(), values.end())});
  }
  return out;
}

std::pair<std::string, double> display_unit(const std::string& unit, double largest) {
  if (unit != "ns") return {unit, 1.0};
  if (largest >= 1e9) return {"s", 1e9};
  if (largest >= 1e6) return {"ms", 1e6};
  if (largest >= 1e3) return {"µs", 1e3};
  return {"ns", 1.0};
}

std::string render_history_chart(const HistoryChart& c, int width, int height) {
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"history\" width=\"" << width << "\" height=\"" << height
    << "\" viewBox=\"0 0 " << width << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  if (c.nights.empty()) {
    o << "<text x=\"" << width / 2 << "\" y=\"" << height / 2 << "\" text-anchor=\"middle\">no nights stored</text>\n"
      << "</svg>\n";
    return o.str();
  }
  double lo = c.nights.front().min, hi = c.nights.front().max;
  for (const auto& n : c.nights) {
    lo = std::min({lo, n.min, n.mean});
    hi = std::max({hi, n.max, n.mean});
  }
  const auto [unit, divisor] = display_unit(c.unit, hi);
  lo /= divisor;
  hi /= divisor;
  const double pad = hi > lo ? 0.08 * (hi - lo) : std::max(1e-9, 0.01 * std::abs(hi));
  const std::vector<double> ticks = svg::nice_ticks(lo - pad, hi + pad, 5);
  if (ticks.empty()) {  // values too large to scale (a range that overflows): say so rather than draw nonsense
    o << "<text x=\"" << width / 2 << "\" y=\"" << height / 2
      << "\" text-anchor=\"middle\">values out of range; no chart</text>\n</svg>\n";
    return o.str();
  }
  const double y_lo = std::min(lo - pad, ticks.front()), y_hi = std::max(hi + pad, ticks.back());
  const double plot_w = width - kLeft - kRight, plot_h = height - kTop - kBottom;
  const size_t n = c.nights.size();
  auto x_of = [&](size_t i) { return kLeft + (n == 1 ? plot_w / 2 : plot_w * static_cast<double>(i) / (n - 1)); };
  auto y_of = [&](double v) { return kTop + plot_h * (1.0 - (v / divisor - y_lo) / (y_hi - y_lo)); };

  // Axes, grid and the y label with its unit.
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << plot_w << "\" height=\"" << plot_h
    << "\" fill=\"none\" stroke=\"#999\"/>\n";
  for (double t : ticks) {
    const double y = kTop + plot_h * (1.0 - (t - y_lo) / (y_hi - y_lo));
    o << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + plot_w << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"#eee\"/>\n<text class=\"ytick\" x=\"" << kLeft - 6 << "\" y=\"" << y + 4
      << "\" text-anchor=\"end\">" << svg::escape(tick_text(t)) << "</text>\n";
  }
  o << "<text class=\"ylabel\" transform=\"translate(16," << kTop + plot_h / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << svg::escape(c.value_label + " (" + unit + ")") << "</text>\n";

  // Dates and commits along x, every k-th night so neighbouring labels never touch.
  const size_t every = std::max<size_t>(1, static_cast<size_t>(std::ceil(kLabelWidth * n / plot_w)));
  for (size_t i = 0; i < n; i += every) {
    const auto& night = c.nights[i];
    const double x = x_of(i);
    o << "<text class=\"xtick\" x=\"" << x << "\" y=\"" << kTop + plot_h + 16 << "\" text-anchor=\"middle\">"
      << svg::escape(night.stamp.substr(0, std::min<size_t>(10, night.stamp.size())).substr(5)) << "</text>\n";
    if (!night.commit.empty()) {
      o << "<text class=\"xcommit\" x=\"" << x << "\" y=\"" << kTop + plot_h + 30
        << "\" text-anchor=\"middle\" fill=\"#666\" font-family=\"monospace\" font-size=\"11\">"
        << svg::escape(night.commit.substr(0, 7)) << "</text>\n";
    }
  }
  o << "<text class=\"xlabel\" x=\"" << kLeft + plot_w / 2 << "\" y=\"" << height - 8
    << "\" text-anchor=\"middle\">night (date UTC, commit)</text>\n";

  // Change points first, so the data draws over them.
  for (const auto& mark : c.marks) {
    if (mark.night >= n) continue;
    const double x = x_of(mark.night) - (mark.night > 0 ? 0.5 * (x_of(mark.night) - x_of(mark.night - 1)) : 0);
    o << "<line class=\"change-point\" x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << kTop << "\" y2=\""
      << kTop + plot_h << "\" stroke=\"#c62828\" stroke-dasharray=\"5,4\"/>\n";
    if (!mark.href.empty()) o << "<a href=\"" << svg::escape(mark.href) << "\">";
    o << "<text x=\"" << std::min(x + 4, kLeft + plot_w - 4) << "\" y=\"" << kTop - 8 << "\" fill=\"#c62828\""
      << (x + 4 + text_width(mark.label) > kLeft + plot_w ? " text-anchor=\"end\"" : "") << ">"
      << svg::escape(mark.label) << "</text>" << (mark.href.empty() ? "" : "</a>") << "\n";
  }
  o << "<polyline fill=\"none\" stroke=\"#1565c0\" stroke-width=\"1.5\" points=\"";
  for (size_t i = 0; i < n; ++i) o << num(x_of(i)) << "," << num(y_of(c.nights[i].mean)) << " ";
  o << "\"/>\n";
  for (size_t i = 0; i < n; ++i) {
    const auto& night = c.nights[i];
    const double x = x_of(i);
    o << "<line x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << y_of(night.min) << "\" y2=\"" << y_of(night.max)
      << "\" stroke=\"#90caf9\"/>\n<circle cx=\"" << x << "\" cy=\"" << y_of(night.mean)
      << "\" r=\"3.5\" fill=\"#1565c0\"><title>"
      << svg::escape(night.stamp + " " + night.commit + ": " + num(night.mean / divisor) + " " + unit)
      << "</title></circle>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace gpt::harness::html
