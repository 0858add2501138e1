// The `harness` program: seeded sweeps and record checks, imports and queries over the results database.
// Exit codes are documented in harness/commands/common.h.
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
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
