// Nightly regression decisions: see regression.h.
#include "harness/nightly/regression.h"

#include <cmath>
#include <iomanip>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "harness/stats/stats.h"
#include "kernels/check.h"

namespace gpt::harness::nightly {
namespace {

double mean_of(const std::vector<double>& x) {
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double mean_of_nights(const std::vector<std::vector<double>>& nights, size_t begin, size_t end) {
  double total = 0;
  for (size_t i = begin; i < end; ++i) total += mean_of(nights[i]);
  return total / static_cast<double>(end - begin);
}

}  // namespace

std::vector<BenchmarkSample> parse_google_benchmark_json(std::string_view json_text, std::string_view source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, out_of_range (numbers beyond double)
    GPT_FAIL(source, ": not valid Google Benchmark JSON: ", e.what());
  }
  GPT_CHECK(doc.is_object() && doc.contains("benchmarks") && doc["benchmarks"].is_array(), source,
            ": expected an object with a \"benchmarks\" array (run with --benchmark_format=json)");
  std::vector<BenchmarkSample> samples;
  // Field types are checked before every get<>(): a wrong type is a message naming the entry, never a bare
  // nlohmann exception (found by tests/fuzz/benchmark_json_fuzz).
  const auto text_field = [&](const nlohmann::json& b, const char* key, const std::string& fallback, size_t index) {
    if (!b.contains(key)) return fallback;
    GPT_CHECK(b[key].is_string(), source, ": benchmark entry ", index, ": \"", key, "\" must be a string");
    return b[key].get<std::string>();
  };
  const auto& entries = doc["benchmarks"];
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& b = entries[i];
    GPT_CHECK(b.is_object(), source, ": benchmark entry ", i, " must be an object");
    if (text_field(b, "run_type", "iteration", i) != "iteration") continue;  // aggregates: recomputed here
    if (b.contains("error_occurred")) {
      GPT_CHECK(b["error_occurred"].is_boolean(), source, ": benchmark entry ", i,
                ": \"error_occurred\" must be true or false");
      if (b["error_occurred"].get<bool>()) continue;
    }
    GPT_CHECK(b.contains("name") && b.contains("real_time") && b["real_time"].is_number(), source,
              ": benchmark entry needs \"name\" and numeric \"real_time\"");
    BenchmarkSample s;
    s.name = text_field(b, "run_name", text_field(b, "name", "", i), i);
    s.real_time = b["real_time"].get<double>();
    s.time_unit = text_field(b, "time_unit", "ns", i);
    samples.push_back(std::move(s));
  }
  return samples;
}

std::vector<RegressionFinding> detect_regressions(const std::vector<BenchmarkHistory>& histories,
                                                  const RegressionOptions& options) {
  std::vector<RegressionFinding> findings;
  std::vector<double> welch_p;  // one per finding, 1.0 when the test is not possible
  for (const BenchmarkHistory& h : histories) {
    GPT_CHECK(!h.nights.empty(), "nightly: benchmark '", h.name, "' has an empty history");
    for (const auto& night : h.nights) {
      GPT_CHECK(!night.empty(), "nightly: benchmark '", h.name, "' has a night without values");
    }
    RegressionFinding f;
    f.name = h.name;
    f.nights = h.nights.size();
    f.latest_mean = mean_of(h.nights.back());
    f.previous_mean = std::numeric_limits<double>::quiet_NaN();
    if (h.nights.size() >= 2) {
      const auto& latest = h.nights.back();
      const auto& previous = h.nights[h.nights.size() - 2];
      f.previous_mean = mean_of(previous);
      if (latest.size() >= 2 && previous.size() >= 2) f.welch_p = stats::welch_t_test(latest, previous).p_value;
    }
    // E-divisive runs on the nightly means: one point per night keeps repetition noise out of the
    // permutation test, as Hunter does with one value per test run.
    std::vector<double> series;
    for (const auto& night : h.nights) series.push_back(mean_of(night));
    if (series.size() >= 2 * options.min_size) {
      for (const auto& cp : stats::e_divisive(series, options.alpha, options.permutations, options.seed,
                                              options.min_size)) {
        f.change_points.push_back(cp.index);
      }
    }
    if (!f.change_points.empty()) {
      const size_t last = f.change_points.back();
      const size_t before_begin = f.change_points.size() >= 2 ? f.change_points[f.change_points.size() - 2] : 0;
      const double before = mean_of_nights(h.nights, before_begin, last);
      const double after = mean_of_nights(h.nights, last, h.nights.size());
      f.change_relative = (after - before) / std::abs(before);
      f.change_point_regression = last + options.recent_nights >= h.nights.size() &&
                                  f.change_relative >= options.min_relative_change;
    }
    welch_p.push_back(f.welch_p);
    findings.push_back(std::move(f));
  }
  const std::vector<bool> rejected = stats::benjamini_hochberg(welch_p, options.fdr);
  for (size_t i = 0; i < findings.size(); ++i) {
    RegressionFinding& f = findings[i];
    const bool slower = f.previous_mean == f.previous_mean &&  // not NaN
                        (f.latest_mean - f.previous_mean) / std::abs(f.previous_mean) >= options.min_relative_change;
    f.welch_regression = rejected[i] && slower;
  }
  return findings;
}

std::string format_findings(const std::vector<RegressionFinding>& findings) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  size_t regressions = 0;
  for (const RegressionFinding& f : findings) {
    os << (f.regression() ? "REGRESSION " : "ok         ") << f.name << ": latest " << std::setprecision(4)
       << f.latest_mean;
    if (f.previous_mean == f.previous_mean) {
      os << " vs previous " << f.previous_mean << " (" << std::showpos << std::setprecision(2)
         << 100.0 * (f.latest_mean - f.previous_mean) / std::abs(f.previous_mean) << "%" << std::noshowpos
         << ", Welch p=" << std::scientific << std::setprecision(2) << f.welch_p << std::fixed << (f.welch_regression ? ", BH-significant" : "")
         << ")";
    }
    if (!f.change_points.empty()) {
      os << "; change point at night " << f.change_points.back() << " (" << std::showpos << std::setprecision(2)
         << 100.0 * f.change_relative << "%" << std::noshowpos << ")";
    }
    os << " over " << f.nights << " nights\n";
    regressions += f.regression() ? 1 : 0;
  }
  os << regressions << " regression(s) in " << findings.size() << " benchmark(s)\n";
  return os.str();
}

}  // namespace gpt::harness::nightly
