#include "harness/commands/common.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
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

void add_global_options(CLI::App& app, GlobalOptions& options) {
  options.db_option =
      app.add_option("--db", options.db, "results database (default: $SPEEDRUN_DB, else results/speedrun.db)")
          ->configurable(false);
  app.add_option("--db-timeout", options.db_timeout_ms, "milliseconds to wait for a locked database")
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));  // not NonNegativeNumber: its message prints DBL_MAX
  gpt::log::add_log_flags(app, options.log);
}

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

std::vector<const char*> harness_arguments(CLI::App& app, GlobalOptions& options, int argc, const char* const* argv) {
  std::vector<const char*> args(argv, argv + argc);
  const auto dashes = std::find_if(args.begin() + std::min(argc, 1), args.end(),
                                   [](const char* word) { return std::string_view(word) == "--"; });
  if (dashes == args.end()) return args;
  // The subcommand is the first word before the `--` that names one.
  const auto subcommands = app.get_subcommands([](CLI::App*) { return true; });
  const CLI::App* named = nullptr;
  for (auto word = args.begin() + 1; word != dashes && named == nullptr; ++word) {
    for (const CLI::App* sub : subcommands) {
      if (sub->check_name(*word)) named = sub;
    }
  }
  if (named == nullptr || named->get_option_no_throw("command") == nullptr) return args;
  options.command_after_dashes = std::vector<std::string>(dashes + 1, args.end());
  args.erase(dashes, args.end());
  return args;
}

void adopt_command_after_dashes(const GlobalOptions& options, std::vector<std::string>& command,
                                std::vector<std::string>& given) {
  if (!options.command_after_dashes) return;
  command.insert(command.end(), options.command_after_dashes->begin(), options.command_after_dashes->end());
  if (std::find(given.begin(), given.end(), "-- CMD") == given.end()) given.push_back("-- CMD");
}

void quiet_progress_if(bool quiet) {
  if (quiet && gpt::log::enabled(spdlog::level::info)) gpt::log::set_level(spdlog::level::warn);
}

Store open_store(const GlobalOptions& options, bool read_only) {
  GPT_CHECK(!(options.db_option != nullptr && options.db_option->count() > 0 && options.db.empty()),
            "--db: the path is empty; give a database file, or leave --db out to use $SPEEDRUN_DB or ", kDefaultDbPath);
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
