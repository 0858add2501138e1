#include "harness/render/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace gpt::harness::svg {

namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

std::string tick_label(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", std::abs(x) < 1e-12 ? 0.0 : x);
  return buf;
}

struct Frame {
  double x0, x1, y0, y1;  // data range
  int width, height;
  static constexpr int left = 70, right = 20, top = 40, bottom = 50;
  double px(double x) const { return left + (x - x0) / (x1 - x0) * (width - left - right); }
  double py(double y) const { return height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom); }
};

void widen(double& lo, double& hi) {
  if (!(hi > lo)) {
    const double pad = std::abs(lo) > 0 ? std::abs(lo) * 0.05 : 1.0;
    lo -= pad;
    hi += pad;
  }
}

void open_svg(std::ostringstream& o, int width, int height, const std::string& title) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << width << " " << height << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << width / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << escape(title)
    << "</text>\n";
}

void y_axis(std::ostringstream& o, const Frame& f, const std::string& label) {
  for (double t : nice_ticks(f.y0, f.y1)) {
    if (t < f.y0 - 1e-12 || t > f.y1 + 1e-12) continue;
    o << "<line x1=\"" << Frame::left << "\" x2=\"" << f.width - Frame::right << "\" y1=\"" << num(f.py(t))
      << "\" y2=\"" << num(f.py(t)) << "\" stroke=\"#e0e0e0\"/>\n"
      << "<text x=\"" << Frame::left - 6 << "\" y=\"" << num(f.py(t) + 4) << "\" text-anchor=\"end\">" << tick_label(t)
      << "</text>\n";
  }
  o << "<text transform=\"translate(16," << f.height / 2 << ") rotate(-90)\" text-anchor=\"middle\">" << escape(label)
    << "</text>\n"
    << "<line x1=\"" << Frame::left << "\" x2=\"" << Frame::left << "\" y1=\"" << Frame::top << "\" y2=\""
    << f.height - Frame::bottom << "\" stroke=\"black\"/>\n"
    << "<line x1=\"" << Frame::left << "\" x2=\"" << f.width - Frame::right << "\" y1=\"" << f.height - Frame::bottom
    << "\" y2=\"" << f.height - Frame::bottom << "\" stroke=\"black\"/>\n";
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int count) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || count < 1) return {};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) return {lo};
  const double raw = (hi - lo) / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(t);
  return ticks;
}

std::string LineChart::render(int width, int height) const {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (const auto& s : series) {
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      x0 = std::min(x0, x);
      x1 = std::max(x1, x);
      y0 = std::min(y0, y);
      y1 = std::max(y1, y);
    }
  }
  if (y_reference && std::isfinite(*y_reference) && std::isfinite(y0)) {
    y0 = std::min(y0, *y_reference);
    y1 = std::max(y1, *y_reference);
  }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  widen(x0, x1);
  widen(y0, y1);
  const Frame f{x0, x1, y0, y1, width, height};
  std::ostringstream o;
  open_svg(o, width, height, title);
  y_axis(o, f, y_label);
  for (double t : nice_ticks(x0, x1)) {
    if (t < x0 - 1e-12 || t > x1 + 1e-12) continue;
    o << "<text x=\"" << num(f.px(t)) << "\" y=\"" << height - Frame::bottom + 16 << "\" text-anchor=\"middle\">"
      << tick_label(t) << "</text>\n";
  }
  o << "<text x=\"" << width / 2 << "\" y=\"" << height - 10 << "\" text-anchor=\"middle\">" << escape(x_label)
    << "</text>\n";
  if (y_reference && std::isfinite(*y_reference)) {
    o << "<line x1=\"" << Frame::left << "\" x2=\"" << width - Frame::right << "\" y1=\"" << num(f.py(*y_reference))
      << "\" y2=\"" << num(f.py(*y_reference)) << "\" stroke=\"black\" stroke-dasharray=\"6,4\"/>\n";
  }
  for (size_t i = 0; i < series.size(); ++i) {
    const char* color = kPalette[i % std::size(kPalette)];
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.5\" points=\"";
    for (auto [x, y] : series[i].points) {
      if (std::isfinite(x) && std::isfinite(y)) o << num(f.px(x)) << "," << num(f.py(y)) << " ";
    }
    o << "\"><title>" << escape(series[i].label) << "</title></polyline>\n";
  }
  o << "</svg>\n";
  return o.str();
}

std::string StripChart::render(int width, int height) const {
  double y0 = std::numeric_limits<double>::infinity(), y1 = -y0;
  for (const auto& g : groups) {
    for (double v : g.values) {
      if (!std::isfinite(v)) continue;
      y0 = std::min(y0, v);
      y1 = std::max(y1, v);
    }
  }
  if (!std::isfinite(y0)) y0 = 0, y1 = 1;
  widen(y0, y1);
  const double pad = (y1 - y0) * 0.08;
  const Frame f{0, static_cast<double>(std::max<size_t>(groups.size(), 1)), y0 - pad, y1 + pad, width, height};
  std::ostringstream o;
  open_svg(o, width, height, title);
  y_axis(o, f, y_label);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& g = groups[gi];
    const double cx = f.px(static_cast<double>(gi) + 0.5);
    const char* color = kPalette[gi % std::size(kPalette)];
    o << "<text x=\"" << num(cx) << "\" y=\"" << height - Frame::bottom + 16 << "\" text-anchor=\"middle\">"
      << escape(g.label.empty() ? "(all)" : g.label) << "</text>\n";
    double sum = 0;
    size_t n = 0;
    for (size_t i = 0; i < g.values.size(); ++i) {
      const double v = g.values[i];
      if (!std::isfinite(v)) continue;
      sum += v;
      ++n;
      // Deterministic horizontal spread so equal values do not hide each other.
      const double jitter = (static_cast<double>((i * 7919) % 21) - 10.0) * 2.0;
      o << "<circle cx=\"" << num(cx + jitter) << "\" cy=\"" << num(f.py(v)) << "\" r=\"4\" fill=\"" << color
        << "\" fill-opacity=\"0.7\"><title>" << tick_label(v) << "</title></circle>\n";
    }
    if (n > 0) {
      const double mean = sum / static_cast<double>(n);
      o << "<line x1=\"" << num(cx - 30) << "\" x2=\"" << num(cx + 30) << "\" y1=\"" << num(f.py(mean)) << "\" y2=\""
        << num(f.py(mean)) << "\" stroke=\"black\" stroke-width=\"2\"><title>mean " << tick_label(mean)
        << "</title></line>\n";
    }
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace gpt::harness::svg
