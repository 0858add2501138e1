// Nightly regression decisions: see regression.h.
#include "harness/nightly/regression.h"

#include <algorithm>
#include <array>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <iomanip>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "harness/stats/stats.h"
#include "base/check.h"

namespace gpt::harness::nightly {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double mean_of(const std::vector<double>& x) {
  return std::accumulate(x.begin(), x.end(), 0.0) / static_cast<double>(x.size());
}

double sd_of(const std::vector<double>& x, double mean) {
  if (x.size() < 2) return 0.0;
  double squares = 0;
  for (double v : x) squares += (v - mean) * (v - mean);
  return std::sqrt(squares / static_cast<double>(x.size() - 1));
}

// P(T >= t) for Student's t with df degrees of freedom.
double upper_tail(double t, double df) {
  if (std::isnan(t)) return 1.0;
  if (std::isinf(t)) return t > 0 ? 0.0 : 1.0;
  return boost::math::cdf(boost::math::complement(boost::math::students_t_distribution<double>(df), t));
}

// The night-to-night standard deviation from the median absolute difference of successive nights (for a
// normal series, median |x_i − x_{i−1}| = 0.9539·σ): a step in the history moves one difference only, so it
// does not inflate the noise, and with it the minimum effect, as the plain standard deviation would.
double robust_sd(const std::vector<double>& x) {
  if (x.size() < 3) return sd_of(x, mean_of(x));
  std::vector<double> diffs;
  for (size_t i = 1; i < x.size(); ++i) diffs.push_back(std::abs(x[i] - x[i - 1]));
  std::nth_element(diffs.begin(), diffs.begin() + static_cast<std::ptrdiff_t>(diffs.size() / 2), diffs.end());
  return diffs[diffs.size() / 2] / 0.9539;
}

}  // namespace

double to_nanoseconds(double value, std::string_view unit, std::string_view source) {
  if (unit == "ns") return value;
  if (unit == "us") return value * 1e3;
  if (unit == "ms") return value * 1e6;
  if (unit == "s") return value * 1e9;
  GPT_FAIL(source, ": unknown time_unit '", unit, "' (expected ns, us, ms or s)");
}

BenchmarkRun parse_google_benchmark_run(std::string_view json_text, std::string_view source) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, out_of_range (numbers beyond double)
    GPT_FAIL(source, ": not valid Google Benchmark JSON: ", e.what());
  }
  GPT_CHECK(doc.is_object() && doc.contains("benchmarks") && doc["benchmarks"].is_array(), source,
            ": expected an object with a \"benchmarks\" array (run with --benchmark_format=json)");
  BenchmarkRun run;
  if (doc.contains("context") && doc["context"].is_object()) {
    const auto& c = doc["context"];
    auto text = [&](const char* key) { return c.contains(key) && c[key].is_string() ? c[key].get<std::string>() : ""; };
    run.context = BenchmarkContext{text("date"),       text("host_name"), text("git_commit"),
                                   text("executable"), text("gpu"),       text("driver")};
  }
  // Field types are checked before every get<>(): a wrong type is a message naming the file and the entry, never a
  // bare nlohmann exception (found by tests/fuzz/benchmark_json_fuzz).
  const auto& entries = doc["benchmarks"];
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& b = entries[i];
    GPT_CHECK(b.is_object(), source, ": benchmark entry ", i, " must be an object");
    const auto text_field = [&](const char* key, const std::string& fallback) {
      if (!b.contains(key)) return fallback;
      GPT_CHECK(b[key].is_string(), source, ": benchmark entry ", i, ": \"", key, "\" must be a string");
      return b[key].get<std::string>();
    };
    if (text_field("run_type", "iteration") != "iteration") continue;  // aggregates: recomputed here
    if (b.contains("error_occurred")) {
      GPT_CHECK(b["error_occurred"].is_boolean(), source, ": benchmark entry ", i,
                ": \"error_occurred\" must be true or false");
      if (b["error_occurred"].get<bool>()) continue;
    }
    GPT_CHECK(b.contains("name") && b["name"].is_string() && b.contains("real_time") && b["real_time"].is_number(),
              source, ": benchmark entry ", i, " needs a string \"name\" and a numeric \"real_time\"");
    BenchmarkSample s;
    s.name = text_field("run_name", b["name"].get<std::string>());
    s.real_time = b["real_time"].get<double>();
    s.time_unit = text_field("time_unit", "ns");
    s.executable = text_field("executable", "");
    // Checked in nanoseconds, as stored: 1e308 ms is finite as written but +inf once converted, and one stored
    // inf makes every later decision over that history fail. A repetition longer than kMaxBenchmarkNs is no
    // measurement either (a unit mix-up or a corrupt file).
    const double ns = to_nanoseconds(s.real_time, s.time_unit, source);  // rejects an unknown unit, naming the file
    GPT_CHECK(std::isfinite(ns) && ns >= 0 && ns <= kMaxBenchmarkNs, source, ": benchmark '", s.name, "': real_time ",
              s.real_time, " ", s.time_unit,
              " is not a time this harness stores (expected a finite "
              "time >= 0 and at most ",
              kMaxBenchmarkNs / 1e9, " s per iteration)");
    run.samples.push_back(std::move(s));
  }
  return run;
}

std::vector<BenchmarkSample> parse_google_benchmark_json(std::string_view json_text, std::string_view source) {
  return parse_google_benchmark_run(json_text, source).samples;
}

std::string night_label(const std::string& stamp, const std::string& commit) {
  std::string label = stamp.size() >= 16 ? stamp.substr(0, 10) + " " + stamp.substr(11, 5) + " UTC" : stamp;
  if (!commit.empty()) label += " (" + commit.substr(0, 7) + ")";
  return label;
}

std::string night_label(const BenchmarkHistory& history, size_t index) {
  if (index >= history.night_stamps.size()) return "night " + std::to_string(index);
  const bool has_commit = index < history.night_commits.size();
  return night_label(history.night_stamps[index], has_commit ? history.night_commits[index] : "");
}

std::vector<RegressionFinding> detect_regressions(const std::vector<BenchmarkHistory>& histories,
                                                  const RegressionOptions& o) {
  GPT_CHECK(o.fdr > 0 && o.fdr < 1, "nightly: --fdr must be in (0, 1), got ", o.fdr);
  GPT_CHECK(o.min_history >= 2, "nightly: the new-night test needs at least 2 nights of history");
  std::vector<RegressionFinding> findings;
  std::vector<double> p_values;  // every test of the night, both kinds
  enum class Test { new_night, recent_nights, change_point };
  std::vector<std::pair<size_t, Test>> p_owner;  // (finding, which test)
  std::vector<size_t> recent_of;                 // per p-value of a recent-nights test: its entry in f.recent
  for (const BenchmarkHistory& h : histories) {
    GPT_CHECK(!h.nights.empty(), "nightly: benchmark '", h.name, "' has an empty history");
    std::vector<double> means;
    for (const auto& night : h.nights) {
      GPT_CHECK(!night.empty(), "nightly: benchmark '", h.name, "' has a night without values");
      means.push_back(mean_of(night));
    }
    const size_t first =
        std::max(std::min(h.level_start, means.size() - 1), means.size() > o.window ? means.size() - o.window : 0);
    const std::vector<double> window(means.begin() + static_cast<std::ptrdiff_t>(first), means.end());
    RegressionFinding f;
    f.name = h.name;
    f.nights = means.size();
    f.latest_mean = window.back();
    f.baseline_mean = f.noise_cv = f.relative = kNaN;
    f.min_effect = o.min_relative_change;
    const std::vector<double> history(window.begin(), window.end() - 1);
    if (!history.empty()) {
      f.baseline_mean = mean_of(history);
      f.relative = (f.latest_mean - f.baseline_mean) / std::abs(f.baseline_mean);
    }
    if (history.size() >= o.min_history) {
      const double sd = sd_of(history, f.baseline_mean);
      f.noise_cv = robust_sd(history) / std::abs(f.baseline_mean);
      f.min_effect = std::max(o.min_relative_change, o.noise_factor * f.noise_cv);
      // A perfectly flat history (a counter, a cached figure) gets a tiny floor instead of a zero scale.
      const double floor = 1e-9 * std::abs(f.baseline_mean);
      const double scale = std::max(sd, floor) * std::sqrt(1.0 + 1.0 / static_cast<double>(history.size()));
      f.new_night_p = upper_tail((f.latest_mean - f.baseline_mean) / scale, static_cast<double>(history.size() - 1));
      p_values.push_back(f.new_night_p);
      p_owner.emplace_back(findings.size(), Test::new_night);
      recent_of.push_back(0);
    } else {
      f.note = std::to_string(history.size()) + " night(s) of history; the test needs " + std::to_string(o.min_history);
    }
    // The k newest nights against the nights before them: a step too small to stand out on one night is confirmed
    // once enough nights at the slower level have gathered (its first nights, now in the history, would widen the
    // spread of the one-night test).
    for (size_t k = 2; k <= o.recent_nights + 1 && window.size() >= o.min_history + k; ++k) {
      const std::vector<double> earlier(window.begin(), window.end() - static_cast<std::ptrdiff_t>(k));
      const double m = mean_of(earlier);
      const double sd = std::max(sd_of(earlier, m), 1e-9 * std::abs(m));
      const double recent = mean_of(std::vector<double>(window.end() - static_cast<std::ptrdiff_t>(k), window.end()));
      const double scale = sd * std::sqrt(1.0 / static_cast<double>(k) + 1.0 / static_cast<double>(earlier.size()));
      f.recent.push_back(
          {k, (recent - m) / std::abs(m), upper_tail((recent - m) / scale, static_cast<double>(earlier.size() - 1))});
      p_values.push_back(f.recent.back().p);
      p_owner.emplace_back(findings.size(), Test::recent_nights);
      recent_of.push_back(f.recent.size() - 1);
    }
    if (window.size() >= 2 * o.min_size) {
      for (const auto& cp : stats::e_divisive(window, o.alpha, o.permutations, o.seed, o.min_size)) {
        f.change_points.push_back(first + cp.index);
      }
    }
    if (!f.change_points.empty() && f.change_points.back() + o.recent_nights >= means.size()) {
      const size_t last = f.change_points.back();
      const size_t before_begin =
          f.change_points.size() >= 2 ? std::max(first, f.change_points[f.change_points.size() - 2]) : first;
      const std::vector<double> before(means.begin() + static_cast<std::ptrdiff_t>(before_begin),
                                       means.begin() + static_cast<std::ptrdiff_t>(last));
      const std::vector<double> after(means.begin() + static_cast<std::ptrdiff_t>(last), means.end());
      const double before_mean = mean_of(before);
      f.change_relative = (mean_of(after) - before_mean) / std::abs(before_mean);
      if (before.size() >= 2 && after.size() >= 2) {
        const auto welch = stats::welch_t_test(after, before);  // two-sided; halve toward "slower"
        f.change_p = welch.t > 0 ? welch.p_value / 2 : 1.0 - welch.p_value / 2;
        if (std::isnan(f.change_p)) f.change_p = 1.0;
        p_values.push_back(f.change_p);
        p_owner.emplace_back(findings.size(), Test::change_point);
        recent_of.push_back(0);
      }
    }
    findings.push_back(std::move(f));
  }
  if (p_values.empty()) return findings;
  const std::vector<bool> rejected = stats::benjamini_hochberg(p_values, o.fdr);
  // Which tests confirmed a slowdown, per finding: they say where the slower level began (for the recent-nights
  // tests, the k of the most significant one that fired).
  std::vector<std::array<bool, 3>> fired(findings.size(), {false, false, false});
  std::vector<std::pair<double, size_t>> best_recent(findings.size(), {2.0, 0});  // (p, k)
  for (size_t i = 0; i < p_values.size(); ++i) {
    if (!rejected[i]) continue;
    const size_t which = p_owner[i].first;
    RegressionFinding& f = findings[which];
    bool confirmed = false;
    switch (p_owner[i].second) {
      case Test::change_point:
        confirmed = f.change_point_regression = f.change_relative >= f.min_effect;
        break;
      case Test::recent_nights: {
        const auto& test = f.recent[recent_of[i]];
        confirmed = test.relative >= f.min_effect;
        if (confirmed && test.p < best_recent[which].first) best_recent[which] = {test.p, test.nights};
        break;
      }
      case Test::new_night:
        confirmed = f.relative >= f.min_effect;
        break;
    }
    f.new_night_regression |= confirmed && p_owner[i].second != Test::change_point;
    fired[which][static_cast<size_t>(p_owner[i].second)] |= confirmed;
  }
  for (size_t i = 0; i < findings.size(); ++i) {
    RegressionFinding& f = findings[i];
    if (!f.regression()) continue;
    // The change point where E-divisive placed it; else the newest night when it alone is slower; else the first
    // of the k newest nights whose test fired most clearly (a step its first nights did not confirm).
    if (fired[i][static_cast<size_t>(Test::change_point)]) {
      f.regression_start = f.change_points.back();
    } else if (fired[i][static_cast<size_t>(Test::new_night)]) {
      f.regression_start = f.nights - 1;
    } else {
      f.regression_start = f.nights - best_recent[i].second;
    }
    f.regression_start_label = night_label(histories[i], f.regression_start);
  }
  return findings;
}

std::string format_findings(const std::vector<RegressionFinding>& findings) {
  std::ostringstream os;
  size_t regressions = 0;
  char line[512];
  for (const RegressionFinding& f : findings) {
    if (std::isnan(f.baseline_mean)) {
      std::snprintf(line, sizeof line, "%s %s: %.6g (first night)", "ok        ", f.name.c_str(), f.latest_mean);
    } else {
      // A test that did not run has no p-value to print.
      char p[32] = "not tested";
      if (!std::isnan(f.new_night_p)) std::snprintf(p, sizeof p, "p=%.2g", f.new_night_p);
      std::snprintf(line, sizeof line, "%s %s: %.6g vs %.6g (%+.2f%%, %s, min effect %.2f%%)",
                    f.regression() ? "REGRESSION" : "ok        ", f.name.c_str(), f.latest_mean, f.baseline_mean,
                    100 * f.relative, p, 100 * f.min_effect);
    }
    os << line;
    if (f.regression()) {
      os << "; slower since " << f.regression_start_label;
      if (f.change_point_regression) {
        std::snprintf(line, sizeof line, " (change point %+.2f%%, p=%.2g)", 100 * f.change_relative, f.change_p);
        os << line;
      }
    }
    if (!f.note.empty()) os << "; " << f.note;
    os << " over " << f.nights << " night(s)\n";
    regressions += f.regression() ? 1 : 0;
  }
  os << regressions << " confirmed regression(s) in " << findings.size() << " benchmark(s)\n";
  return os.str();
}

}  // namespace gpt::harness::nightly
