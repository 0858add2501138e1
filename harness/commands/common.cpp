#include "harness/commands/common.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iostream>
#include <limits>
#include <sstream>
#include <string_view>
#include <system_error>

#include "harness/launcher/safe_files.h"
#include "harness/launcher/safe_names.h"
#include "harness/record/spool.h"
#include "base/check.h"
#include "base/log.h"

#include <spdlog/spdlog.h>

namespace gpt::harness {

namespace {

// `input` shortened and with control bytes shown as '?', for an error message that must not carry them.
std::string shown(const std::string& input) {
  std::string out;
  for (char c : input.substr(0, 64)) out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  return input.size() > 64 ? out + "..." : out;
}

std::string figure(double v) {
  std::ostringstream os;
  os << v;  // %g: 1e-12, 1e+07
  return os.str();
}

}  // namespace

CLI::Validator finite_in(double lo, double hi) {
  const std::string range = "[" + figure(lo) + ", " + figure(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& input) -> std::string {
        double v = 0;
        const char* begin = input.data();
        const auto [end, ec] = std::from_chars(begin, begin + input.size(), v);
        if (ec != std::errc() || end != begin + input.size() || !std::isfinite(v) || v < lo || v > hi) {
          return "expected a finite number in " + range + ", got '" + shown(input) + "'";
        }
        return {};
      },
      "NUMBER in " + range);
}

CLI::Validator whole_in(std::int64_t lo, std::int64_t hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& input) -> std::string {
        std::int64_t v = 0;
        const char* begin = input.data();
        const auto [end, ec] = std::from_chars(begin, begin + input.size(), v);
        if (ec != std::errc() || end != begin + input.size() || v < lo || v > hi) {
          return "expected a whole number in " + range + ", got '" + shown(input) + "'";
        }
        return {};
      },
      "INT in " + range);
}

void add_global_options(CLI::App& app, GlobalOptions& options) {
  options.db_option =
      app.add_option("--db", options.db, "results database (default: $SPEEDRUN_DB, else results/speedrun.db)")
          ->configurable(false);
  app.add_option("--db-timeout", options.db_timeout_ms, "milliseconds to wait for a locked database")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));  // not NonNegativeNumber: its message prints DBL_MAX
  gpt::log::add_log_flags(app, options.log);
}

namespace {

// Whether `text` is "path/file.cpp:LINE" (a source location as GPT_CHECK writes it).
bool is_source_location(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == text.size()) return false;
  if (text.find_first_not_of("0123456789", colon + 1) != std::string_view::npos) return false;
  const std::string_view path = text.substr(0, colon);
  if (path.find_first_of(" []") != std::string_view::npos) return false;
  for (const std::string_view ext : {".cpp", ".h", ".cu", ".cuh", ".hpp"}) {
    if (path.size() > ext.size() && path.substr(path.size() - ext.size()) == ext) return true;
  }
  return false;
}

}  // namespace

namespace {

// Length of the well-formed UTF-8 sequence at text[at], or 0 when the bytes there are not one.
size_t utf8_sequence(std::string_view text, size_t at) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return 1;
  const size_t length = lead >= 0xc2 && lead <= 0xdf   ? 2
                        : lead >= 0xe0 && lead <= 0xef ? 3
                        : lead >= 0xf0 && lead <= 0xf4 ? 4
                                                       : 0;
  if (length == 0 || at + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return 0;
  }
  if ((lead == 0xe0 && byte(at + 1) < 0xa0) || (lead == 0xed && byte(at + 1) > 0x9f) ||
      (lead == 0xf0 && byte(at + 1) < 0x90) || (lead == 0xf4 && byte(at + 1) > 0x8f)) {
    return 0;  // overlong, a surrogate, or beyond U+10FFFF
  }
  return length;
}

}  // namespace

std::string printable_text(std::string_view text) {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    const auto c = static_cast<unsigned char>(text[at]);
    const size_t length = utf8_sequence(text, at);
    if (length == 0 || (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
      ++at;
      continue;
    }
    out.append(text.substr(at, length));
    at += length;
  }
  return out;
}

std::string user_error_message(const std::string& raw, bool keep_source_locations) {
  // Names in messages come from the command line, files and the database: a control byte or broken UTF-8 in one
  // must not reach the terminal as it is (an escape sequence would act on it).
  const std::string what = printable_text(raw);
  if (keep_source_locations) return what;
  // GPT_CHECK appends " [path/file.cpp:LINE]"; nested errors carry theirs inside the message.
  std::string out;
  size_t at = 0;
  while (at < what.size()) {
    const size_t open = what.find(" [", at);
    const size_t close = open == std::string::npos ? std::string::npos : what.find(']', open + 2);
    if (close == std::string::npos) break;
    const bool location = is_source_location(std::string_view(what).substr(open + 2, close - open - 2));
    out.append(what, at, location ? open - at : close + 1 - at);
    at = close + 1;
  }
  out.append(what, std::min(at, what.size()), std::string::npos);
  return out;
}

void quiet_progress_if(bool quiet) {
  if (quiet && gpt::log::enabled(spdlog::level::info)) gpt::log::set_level(spdlog::level::warn);
}

Store open_store(const GlobalOptions& options, bool read_only) {
  GPT_CHECK(!(options.db_option != nullptr && options.db_option->count() > 0 && options.db.empty()),
            "--db: the path is empty; give a database file, or leave --db out to use $SPEEDRUN_DB or ",
            kDefaultDbPath);
  const std::filesystem::path path = resolve_db_path(options.db);
  spdlog::debug("database {} ({}, waiting up to {} ms while locked)", path.string(),
                read_only ? "read-only" : "read-write", options.db_timeout_ms);
  Store store = Store::open(path, sql::OpenOptions{read_only, options.db_timeout_ms});
  if (!read_only) store_spooled_runs(store, results_dir(options) / "runs");
  return store;
}

std::filesystem::path results_dir(const GlobalOptions& options) {
  const auto db = resolve_db_path(options.db);
  return db.has_parent_path() ? db.parent_path() : std::filesystem::path(".");
}

namespace {

std::filesystem::path sweep_folder(const GlobalOptions& options, const char* kind, const std::string& sweep_name) {
  check_path_name("sweep name", sweep_name);
  const std::filesystem::path relative = std::filesystem::path(kind) / sweep_name;
  make_folders_below(results_dir(options), relative);
  return results_dir(options) / relative;
}

}  // namespace

std::filesystem::path sweep_runs_dir(const GlobalOptions& options, const std::string& sweep_name) {
  return sweep_folder(options, "runs", sweep_name);
}

std::filesystem::path sweep_reports_dir(const GlobalOptions& options, const std::string& sweep_name) {
  return sweep_folder(options, "reports", sweep_name);
}

CLI::Option* add_sweep_name_option(CLI::App& command, std::string& name, const std::string& description) {
  return command.add_option("--name", name, description)->check(name_check(path_name_problem, "NAME"));
}

}  // namespace gpt::harness
