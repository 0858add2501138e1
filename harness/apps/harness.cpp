// The `harness` program: seeded sweeps and record checks, imports and queries over the results database.
// Exit codes are documented in harness/commands/common.h.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <iostream>
#include <vector>

#include "harness/commands/check_db.h"
#include "harness/commands/common.h"
#include "harness/commands/compare.h"
#include "harness/commands/import.h"
#include "harness/commands/nightly.h"
#include "harness/commands/plan.h"
#include "harness/commands/query.h"
#include "harness/commands/record.h"
#include "harness/commands/report.h"
#include "harness/commands/site.h"
#include "base/check.h"
#include "base/log.h"

namespace {

// CLI11 answers a missing or unknown command word with "A subcommand is required": name the word and the commands of
// the level it was given at instead ("harness query nosuch" lists query's). Empty when the error is something else.
std::string unknown_command_message(const CLI::App& app) {
  const CLI::App* level = &app;
  std::string path = "harness";
  for (;;) {
    const std::vector<CLI::App*> parsed = level->get_subcommands();
    if (parsed.empty()) break;
    level = parsed.front();
    path += " " + level->get_name();
  }
  // Words a subcommand does not take fall through to the levels above it (app.fallthrough()).
  const std::vector<std::string> left = app.remaining(true);
  if (level->get_require_subcommand_min() == 0) return "";
  if (!left.empty() && left.front().starts_with("-")) return path + ": unknown option '" + left.front() + "'";
  std::string names;
  for (const CLI::App* command : level->get_subcommands([](const CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + command->get_name();
  }
  if (left.empty()) return path + ": give a command (one of: " + names + ")";
  return path + ": unknown command '" + left.front() + "' (expected one of: " + names + ")";
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpt::harness;
  gpt::log::start("harness");
  CLI::App app{"harness: reproducibility and benchmarking for the NanoGPT speedrun trainer"};
  app.require_subcommand(1);
  app.fallthrough();
  GlobalOptions options;
  add_global_options(app, options);
  add_record_command(app, options);
  add_import_command(app, options);
  add_query_command(app, options);
  add_plan_command(app, options);
  add_report_command(app, options);
  add_check_db_command(app, options);
  add_site_command(app, options);
  add_compare_command(app, options);
  add_nightly_command(app, options);
  try {
    const std::vector<const char*> args = harness_arguments(app, options, argc, argv);
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::RuntimeError& e) {  // compare/nightly report their verdict as an exit code
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (const std::string unknown = unknown_command_message(app); !unknown.empty()) {
      std::cerr << unknown << "\nRun with --help for more information.\n";
      return kExitUsage;
    }
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  } catch (const gpt::Error& e) {  // the failure that decides the exit status: printed at every log level
    std::cerr << "harness: error: " << gpt::user_error_message(e.what(), gpt::log::enabled(spdlog::level::debug))
              << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "harness: error: " << gpt::user_error_message(e.what(), gpt::log::enabled(spdlog::level::debug))
              << "\n";
    return kExitFail;
  }
  // Output that never arrived (a full disk, a closed pipe) is a failure of the command, not a success.
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "harness: error: the output could not be written to standard output (" << std::strerror(errno)
              << ")\n";
    return options.exit_code == kExitPass ? kExitFail : options.exit_code;
  }
  return options.exit_code;
}
