#include "harness/report/power_section.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace gpt::harness {

namespace {

std::string num(double x, const char* format) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

std::string runs_needed_text(const stats::PowerPlan& p) {
  if (p.runs_needed) return std::to_string(*p.runs_needed);
  return p.effect > 0 ? "more than 10^6" : "never (the mean is not below the target)";
}

nlohmann::json finite_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); }

}  // namespace

std::vector<std::size_t> default_power_rows(std::size_t observed) {
  std::vector<std::size_t> rows = {2, 4, 8, 16, 32, 64, 128};
  if (observed >= 2 && std::find(rows.begin(), rows.end(), observed) == rows.end()) rows.push_back(observed);
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::string power_text(const stats::PowerPlan& p, const std::string& indent) {
  std::ostringstream o;
  o << indent << "power analysis (one-sided t-test, alpha " << num(p.alpha, "%.4g") << ", power "
    << num(p.power, "%.4g") << ", mean " << num(p.mean, "%.4f") << ", std " << num(p.std, "%.4f")
    << ", effect d = " << num(p.effect, "%.3f") << ")\n";
  o << indent << "  runs needed for power " << num(p.power, "%.4g") << ": " << runs_needed_text(p) << "\n";
  if (!p.rows.empty()) {
    o << indent << "  runs   power at this effect   smallest provable improvement   mean needed\n";
    for (const auto& r : p.rows) {
      char line[160];
      std::snprintf(line, sizeof line, "  %4zu   %20s   %29s   %11s\n", r.runs, num(r.power, "%.4f").c_str(),
                    num(r.min_improvement, "%.5f").c_str(), num(r.max_mean, "%.5f").c_str());
      o << indent << line;
    }
  }
  return o.str();
}

std::string power_markdown(const stats::PowerPlan& p) {
  std::ostringstream o;
  o << "One-sided one-sample t-test at alpha " << num(p.alpha, "%.4g") << ", from mean " << num(p.mean, "%.4f")
    << " and std " << num(p.std, "%.4f") << " (effect d = " << num(p.effect, "%.3f") << "): **runs needed for power "
    << num(p.power, "%.4g") << ": " << runs_needed_text(p) << "**.\n\n";
  if (!p.rows.empty()) {
    o << "| runs | power at this effect | smallest provable improvement | mean needed |\n|---|---|---|---|\n";
    for (const auto& r : p.rows) {
      o << "| " << r.runs << " | " << num(r.power, "%.4f") << " | " << num(r.min_improvement, "%.5f") << " | "
        << num(r.max_mean, "%.5f") << " |\n";
    }
  }
  return o.str();
}

nlohmann::json power_json(const stats::PowerPlan& p) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : p.rows) {
    rows.push_back({{"runs", r.runs},
                    {"power", finite_or_null(r.power)},
                    {"min_improvement", finite_or_null(r.min_improvement)},
                    {"max_mean", finite_or_null(r.max_mean)}});
  }
  return {{"mean", p.mean},
          {"std", p.std},
          {"target", p.target},
          {"alpha", p.alpha},
          {"power", p.power},
          {"effect", finite_or_null(p.effect)},
          {"runs_needed", p.runs_needed ? nlohmann::json(*p.runs_needed) : nlohmann::json(nullptr)},
          {"rows", rows}};
}

}  // namespace gpt::harness
