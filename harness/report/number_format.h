#pragma once
// Number formatting shared by the text, Markdown and HTML reports.
#include <cmath>
#include <cstdio>
#include <string>

namespace gpt::harness::report_format {

// x with a fixed number of decimals; non-finite values as "-" (NaN), "inf" or "-inf".
inline std::string fixed(double x, int decimals) {
  if (!std::isfinite(x)) return std::isnan(x) ? "-" : (x > 0 ? "inf" : "-inf");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

// x with 4 significant digits (p-values, alphas).
inline std::string general(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", x);
  return buf;
}

}  // namespace gpt::harness::report_format
