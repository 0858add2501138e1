#include "harness/nightly/night.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/nightly/change_point_tracking.h"
#include "harness/nightly/tracked_night.h"
#include "harness/render/history_chart.h"
#include "base/check.h"
#include "base/utc_time.h"

namespace gpt::harness::nightly {

namespace {

bool has_label(const nlohmann::json& test, const std::string& label) {
  if (!test.contains("properties") || !test["properties"].is_array()) return false;
  for (const auto& p : test["properties"]) {
    if (p.value("name", "") != "LABELS" || !p.contains("value") || !p["value"].is_array()) continue;
    for (const auto& v : p["value"]) {
      if (v.is_string() && v.get<std::string>() == label) return true;
    }
  }
  return false;
}

std::string file_safe(std::string name) {
  for (char& c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_')) c = '_';
  }
  return name;
}

}  // namespace

std::vector<BenchProgram> bench_programs_from_ctest_json(const std::string& ctest_json, bool include_gpu) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(ctest_json);
  } catch (const nlohmann::json::exception& e) {
    GPT_FAIL("nightly: `ctest --show-only=json-v1` gave no JSON: ", e.what());
  }
  std::vector<BenchProgram> programs;
  if (!doc.contains("tests") || !doc["tests"].is_array()) return programs;
  for (const auto& test : doc["tests"]) {
    if (!has_label(test, "bench") || (!include_gpu && has_label(test, "gpu"))) continue;
    if (!test.contains("command") || !test["command"].is_array() || test["command"].empty()) continue;
    BenchProgram p;
    for (const auto& arg : test["command"]) p.argv.push_back(arg.get<std::string>());
    p.suite = std::filesystem::path(p.argv.front()).filename().string();
    programs.push_back(std::move(p));
  }
  return programs;
}

std::vector<BenchProgram> bench_programs_from_manifest(const std::filesystem::path& manifest) {
  std::ifstream in(manifest);
  GPT_CHECK(in.good(), "--manifest: cannot read '", manifest.string(), "'");
  std::vector<BenchProgram> programs;
  std::string line;
  while (std::getline(in, line)) {
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    BenchProgram p;
    for (std::string w; words >> w;) p.argv.push_back(w);
    if (p.argv.empty()) continue;
    std::filesystem::path program(p.argv.front());
    if (program.is_relative()) program = manifest.parent_path() / program;
    p.argv.front() = program.string();
    p.suite = program.filename().string();
    programs.push_back(std::move(p));
  }
  return programs;
}

std::string utc_stamp_from_benchmark_date(const std::string& date, const std::string& source) {
  int y, mo, d, h, mi, s;
  char sep = 0;
  int consumed = 0;
  const bool ok =
      std::sscanf(date.c_str(), "%4d-%2d-%2d%c%2d:%2d:%2d%n", &y, &mo, &d, &sep, &h, &mi, &s, &consumed) == 7 &&
      (sep == 'T' || sep == ' ');
  GPT_CHECK(ok, source, ": context.date '", date, "' is not a date like 2026-12-05T02:00:11+00:00");
  std::string rest = date.substr(static_cast<size_t>(consumed));
  if (!rest.empty() && rest[0] == '.') {  // fractional seconds
    size_t i = 1;
    while (i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i]))) ++i;
    rest.erase(0, i);
  }
  long offset_s = 0;
  if (!rest.empty() && rest != "Z") {
    int oh = 0, om = 0;
    char sign = rest[0];
    GPT_CHECK((sign == '+' || sign == '-') && (std::sscanf(rest.c_str() + 1, "%2d:%2d", &oh, &om) == 2 ||
                                               std::sscanf(rest.c_str() + 1, "%2d%2d", &oh, &om) == 2),
              source, ": context.date '", date, "' has an unreadable time zone '", rest, "'");
    offset_s = (sign == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
  }
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return utc_iso8601(timegm(&tm) - offset_s);
}

namespace {

std::string percent(double relative) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.2f%%", 100 * relative);
  return buf;
}

std::string change_point_line(const ChangePointRecord& c) {
  std::string line = c.suite + "/" + c.name + (c.gpu.empty() ? "" : " on " + c.gpu) + ": " + percent(c.relative) +
                     " since " + night_label(c.start_night, c.start_commit) + ", found " +
                     night_label(c.found_night, c.found_commit) + ", " + c.status;
  if (!c.resolved_night.empty()) line += " on " + night_label(c.resolved_night, "");
  return line;
}

}  // namespace

std::string format_change_points(const NightReport& r) {
  std::ostringstream o;
  for (const auto& c : r.found) o << "NEW CHANGE POINT " << change_point_line(c) << "\n";
  for (const auto& c : r.tracked) {
    bool fresh = false;
    for (const auto& f : r.found) fresh = fresh || f.id == c.id;
    if (!fresh && c.status != "resolved") o << "tracked change point " << change_point_line(c) << "\n";
  }
  return o.str();
}

std::filesystem::path write_night_report(const NightReport& r, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  std::ostringstream md;
  size_t confirmed = 0;
  for (const auto& f : r.findings) confirmed += f.regression() ? 1 : 0;
  md << "# Nightly " << night_label(r.night, r.revision) << "\n\n- night: " << r.night
     << "\n- commit: " << (r.revision.empty() ? "- (the benchmark files name none)" : r.revision)
     << "\n- benchmarks: " << r.findings.size() << ", confirmed regressions tonight: " << confirmed
     << ", new change points: " << r.found.size() << "\n- failed or skipped programs: " << r.failures.size()
     << "\n- decision: one Benjamini–Hochberg procedure over every test of the night (new-night t-tests and "
        "change points); a regression also needs a slowdown of at least the benchmark's minimum effect\n";
  for (const auto& note : r.notes) md << "- " << note << "\n";
  md << "\n| benchmark | verdict | latest | baseline | change | p (new night) | min effect | slower since |\n"
        "|---|---|---|---|---|---|---|---|\n";
  char buf[160];
  for (const auto& f : r.findings) {
    md << "| " << f.name << " | " << (f.regression() ? "**REGRESSION**" : "ok") << " | ";
    std::snprintf(buf, sizeof buf, "%.6g | ", f.latest_mean);
    md << buf;
    if (std::isnan(f.baseline_mean)) {
      md << "- | - | - | ";
    } else {
      std::snprintf(buf, sizeof buf, "%.6g | %+.2f%% | ", f.baseline_mean, 100 * f.relative);
      md << buf;
      if (std::isnan(f.new_night_p)) {  // a test that did not run has no p-value
        md << "not tested | ";
      } else {
        std::snprintf(buf, sizeof buf, "%.3g | ", f.new_night_p);
        md << buf;
      }
    }
    std::snprintf(buf, sizeof buf, "%.2f%% | ", 100 * f.min_effect);
    md << buf;
    md << (f.regression() ? "slower since " + f.regression_start_label : std::string("-")) << " |\n";
  }
  if (!r.tracked.empty()) {
    md << "\n## Change points\n\nEach is reported once, on the night it was found, then tracked: open, confirmed "
          "(the slower level held "
       << kConfirmNights
       << " more nights), resolved (a night came back within half "
          "the minimum effect).\n\n| benchmark | change | first slower night | found | status |\n"
          "|---|---|---|---|---|\n";
    for (const auto& c : r.tracked) {
      bool fresh = false;
      for (const auto& f : r.found) fresh = fresh || f.id == c.id;
      md << "| " << c.suite << "/" << c.name << (c.gpu.empty() ? "" : " on " + c.gpu) << " | " << percent(c.relative)
         << " | " << night_label(c.start_night, c.start_commit) << " | " << night_label(c.found_night, c.found_commit)
         << (fresh ? " (**new tonight**)" : "") << " | " << c.status
         << (c.resolved_night.empty() ? "" : " on " + night_label(c.resolved_night, "")) << " |\n";
    }
  }
  if (!r.failures.empty()) {
    md << "\n## Failed or skipped programs\n\n";
    for (const auto& f : r.failures) md << "- `" << f.suite << "`: " << f.reason << "\n";
  }
  bool plots = false;
  for (size_t i = 0; i < r.findings.size() && i < r.histories.size(); ++i) {
    if (!r.findings[i].regression()) continue;
    if (!plots) md << "\n## Flagged benchmarks\n\n";
    plots = true;
    const BenchmarkHistory& h = r.histories[i];
    html::HistoryChart chart{
        "nightly mean",
        r.findings[i].name.rfind("smoke/", 0) == 0 && r.findings[i].name.find("loss") != std::string::npos ? "loss"
                                                                                                           : "ns",
        {},
        {}};
    chart.nights = html::history_nights(h.nights, h.night_stamps, h.night_commits);
    chart.marks.push_back({r.findings[i].regression_start, "slower since " + r.findings[i].regression_start_label, ""});
    const std::string file = file_safe(r.findings[i].name) + ".svg";
    std::ofstream(dir / file) << html::render_history_chart(chart);
    md << "### " << r.findings[i].name << "\n\n![" << r.findings[i].name << "](" << file << ")\n\n";
  }
  const auto path = dir / "report.md";
  std::ofstream out(path);
  GPT_CHECK(out.good(), "nightly: cannot write '", path.string(), "'");
  out << md.str();
  return path;
}

}  // namespace gpt::harness::nightly
