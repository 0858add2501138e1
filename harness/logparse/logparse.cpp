#include "harness/logparse/logparse.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "harness/store/run_checks.h"
#include "base/check.h"
#include "base/file_read.h"

namespace gpt::harness {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    size_t j = i;
    while (j < line.size() && !is_space(line[j])) ++j;
    if (j > i) fields.push_back(line.substr(i, j - i));
    i = j;
  }
  return fields;
}

// Whole-string number parse; accepts nan/inf (diverged runs print them).
std::optional<double> parse_double(std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (text.front() == '+') text.remove_prefix(1);
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<std::int64_t> parse_int(std::string_view text) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

bool valid_key(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::optional<StepLine> parse_fields(const std::vector<std::string_view>& fields) {
  if (fields.empty()) return std::nullopt;
  StepLine line;
  bool have_step = false;
  for (std::string_view field : fields) {
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const std::string_view key = field.substr(0, colon);
    const std::string_view value = field.substr(colon + 1);
    if (!valid_key(key)) return std::nullopt;
    if (key == "step") {
      const size_t slash = value.find('/');
      if (slash == std::string_view::npos) return std::nullopt;
      auto s = parse_int(value.substr(0, slash));
      auto total = parse_int(value.substr(slash + 1));
      if (!s || !total) return std::nullopt;
      line.step = *s;
      line.total = *total;
      have_step = true;
      if (*s < 0 || *total <= 0) {
        line.problem = "step:" + std::string(value) + " (expected a step >= 0 of a total >= 1)";
      } else if (*s > *total) {
        line.problem = "step " + std::to_string(*s) + " is beyond the total step count " + std::to_string(*total);
      }
    } else if (key == "val_loss" || key == "train_loss") {
      auto x = parse_double(value);
      if (!x) {
        if (line.problem.empty())
          line.problem = std::string(key) + " '" + std::string(value.substr(0, 40)) +
                         "' is not a number (expected a decimal such as 3.2771)";
        continue;
      }
      (key == "val_loss" ? line.val_loss : line.train_loss) = *x;
      const std::size_t point = value.find('.');
      if (key == "val_loss" && point != std::string_view::npos) {
        const std::size_t digits_end = std::min(value.find_first_not_of("0123456789", point + 1), value.size());
        line.val_loss_decimals = static_cast<int>(digits_end - point - 1);
      }
    } else if (key == "train_time") {
      std::string_view number = value;
      double scale = 1.0;
      if (number.ends_with("ms")) {
        number.remove_suffix(2);
      } else if (number.ends_with("s")) {
        number.remove_suffix(1);
        scale = 1000.0;
        line.time_in_seconds = true;
      }
      auto t = parse_double(number);
      if (!t) return std::nullopt;
      line.train_time_ms = *t * scale;
    }
    // Any other key:value field (step_avg, lr, tokens, ...) is tolerated and ignored.
  }
  if (!have_step) return std::nullopt;
  return line;
}

bool is_separator(std::string_view line) {
  while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
  if (line.size() < 10) return false;
  for (char c : line) {
    if (c != '=') return false;
  }
  return true;
}

std::string loss_text(double loss) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", loss);
  return text;
}

// Two printings of one validation (a repeated line) agree bit for bit, nan included.
bool same_loss(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

struct RunBuilder {
  ParsedLog log;
  std::optional<StepLine> last;  // the last step line
  std::optional<std::int64_t> first_nonfinite_step;
  bool ends_mid_line = false;
  std::string diverged_line;  // the trainer's `diverged: <why>` line, if printed
  std::string first_problem;  // the first step line that cannot be read (StepLine::problem), with its line number

  void add(const StepLine& s, size_t line_no) {
    if (log.step_lines == 0) log.first_line = line_no;
    log.last_line = line_no;
    ++log.step_lines;
    if (!s.problem.empty()) {  // the first unreadable step line decides the run; its numbers are not used
      if (first_problem.empty()) first_problem = "line " + std::to_string(line_no) + ": " + s.problem;
      return;
    }
    log.total_steps = s.total;
    log.time_in_seconds = log.time_in_seconds || s.time_in_seconds;
    if (s.val_loss) log.val_points.push_back({s.step, *s.val_loss, s.train_time_ms, s.val_loss_decimals});
    if (s.train_loss) log.last_train_loss = s.train_loss;
    const bool nonfinite =
        (s.val_loss && !std::isfinite(*s.val_loss)) || (s.train_loss && !std::isfinite(*s.train_loss));
    if (nonfinite && !first_nonfinite_step) first_nonfinite_step = s.step;
    last = s;
  }

  ParsedLog finish(const LogParseOptions& options) {
    if (!first_problem.empty()) {
      if (last) log.last_step = last->step;
      log.outcome = LogOutcome::invalid;
      log.reason = first_problem;
      return std::move(log);
    }
    if (!last) {
      if (!diverged_line.empty()) {
        log.outcome = LogOutcome::diverged;
        log.reason = diverged_line;
      } else {
        log.outcome = LogOutcome::incomplete;
        log.reason = "no step lines found (expected `step:s/N val_loss:x train_time:Tms ...`)";
      }
      return std::move(log);
    }
    log.last_step = last->step;
    const std::int64_t total = *log.total_steps;
    for (const auto& point : log.val_points) {
      if (auto problem = loss_problem(point.val_loss)) {
        log.outcome = LogOutcome::invalid;
        log.reason = "val_loss at step " + std::to_string(point.step) + " " + *problem;
        return std::move(log);
      }
    }
    std::optional<LogValPoint> final_point;
    for (auto it = log.val_points.rbegin(); it != log.val_points.rend(); ++it) {
      if (it->step != total) continue;
      if (final_point && !same_loss(final_point->val_loss, it->val_loss)) {
        log.outcome = LogOutcome::invalid;
        log.reason = "two different final validations at step " + std::to_string(total) + " (val_loss " +
                     loss_text(it->val_loss) + ", then " + loss_text(final_point->val_loss) + ")";
        return std::move(log);
      }
      if (!final_point) final_point = *it;
    }
    // The opt-in fixed early stop: the run ends on a validation at exactly the agreed step.
    if (!final_point && options.early_stop_step && last->val_loss && last->step == *options.early_stop_step) {
      final_point = LogValPoint{last->step, *last->val_loss, last->train_time_ms, last->val_loss_decimals};
    }
    log.final_step = final_point ? final_point->step : last->step;
    if (final_point) {
      log.final_val_loss = final_point->val_loss;
      log.final_val_loss_decimals = final_point->val_loss_decimals;
      log.final_train_time_ms = final_point->train_time_ms;
      if (!std::isfinite(final_point->val_loss)) {
        log.outcome = LogOutcome::diverged;
        log.reason = "final val loss is " + std::string(std::isnan(final_point->val_loss) ? "nan" : "inf") +
                     " at step " + std::to_string(final_point->step);
      } else {
        log.outcome = LogOutcome::complete;
      }
      return std::move(log);
    }
    if (first_nonfinite_step || !diverged_line.empty()) {
      log.outcome = LogOutcome::diverged;
      log.reason = !diverged_line.empty()
                       ? diverged_line + " (step " + std::to_string(last->step) + "/" + std::to_string(total) + ")"
                       : "loss became non-finite at step " + std::to_string(*first_nonfinite_step) + " of " +
                             std::to_string(total);
      return std::move(log);
    }
    log.outcome = LogOutcome::incomplete;
    if (last->val_loss) {
      log.reason = "stopped at a validation at step " + std::to_string(last->step) + "/" + std::to_string(total) +
                   " (val_loss " + loss_text(*last->val_loss) + "), before the total step count";
      if (!options.early_stop_step) log.reason += " (a planned early stop must be declared: --early-stop-step)";
    } else {
      log.reason =
          "stopped at step " + std::to_string(last->step) + "/" + std::to_string(total) + " without a final validation";
    }
    if (ends_mid_line) log.reason += " (the log ends mid-line)";
    return std::move(log);
  }
};

}  // namespace

std::optional<StepLine> parse_step_line(std::string_view line) { return parse_fields(split_fields(line)); }

std::optional<std::pair<double, double>> parse_peak_memory_line(std::string_view line) {
  const auto f = split_fields(line);
  // peak memory allocated: N MiB reserved: M MiB
  if (f.size() != 8 || f[0] != "peak" || f[1] != "memory" || f[2] != "allocated:" || f[4] != "MiB" ||
      f[5] != "reserved:" || f[7] != "MiB") {
    return std::nullopt;
  }
  auto allocated = parse_double(f[3]);
  auto reserved = parse_double(f[6]);
  if (!allocated || !reserved) return std::nullopt;
  return std::make_pair(*allocated, *reserved);
}

std::vector<ParsedLog> parse_log(std::string_view text, const LogParseOptions& options) {
  std::vector<ParsedLog> runs;
  RunBuilder current;
  bool separator_after_steps = false;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    const bool terminated = end != std::string_view::npos;
    if (!terminated) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (is_separator(line)) {
      separator_after_steps = separator_after_steps || current.last.has_value();
      continue;
    }
    std::optional<StepLine> step;
    if (terminated) {
      step = parse_step_line(line);
    } else {
      // The last field of an unterminated line may be cut short: judge the line without it, and only when the
      // loss and the time before it are whole (the cut is in step_avg or later): a line cut inside or right
      // after its loss is never a result, wherever in the number the cut fell.
      auto fields = split_fields(line);
      if (!fields.empty()) fields.pop_back();
      step = parse_fields(fields);
      if (step && !step->train_time_ms) step.reset();
      current.ends_mid_line = true;
    }
    if (step) {
      const bool new_run = current.last && (separator_after_steps || step->total != current.last->total ||
                                            step->step < current.last->step);
      if (new_run) {
        runs.push_back(current.finish(options));
        current = RunBuilder{};
        current.ends_mid_line = !terminated;
      }
      separator_after_steps = false;
      current.add(*step, line_no);
      continue;
    }
    if (terminated && line.starts_with("diverged:")) {
      std::string why(line);
      while (!why.empty() && is_space(why.back())) why.pop_back();
      if (why.size() > 200) why.resize(200);
      current.diverged_line = why;
      continue;
    }
    if (auto memory = parse_peak_memory_line(line)) {  // the closing "MiB" guards against a cut line
      current.log.peak_memory_mib = memory->first;
      current.log.reserved_memory_mib = memory->second;
    }
  }
  if (current.last || runs.empty()) runs.push_back(current.finish(options));
  return runs;
}

std::vector<ParsedLog> parse_log_file(const std::filesystem::path& path, const LogParseOptions& options) {
  return parse_log(read_file(path, "log file"), options);
}

}  // namespace gpt::harness
