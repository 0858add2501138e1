#include "harness/commands/common.h"

namespace gpt::harness {

void add_global_options(CLI::App& app, GlobalOptions& options) {
  app.add_option("--db", options.db, "results database (default: $SPEEDRUN_DB, else results/speedrun.db)")
      ->configurable(false);
  app.add_option("--db-timeout", options.db_timeout_ms, "milliseconds to wait for a locked database")
      ->check(CLI::NonNegativeNumber);
}

Store open_store(const GlobalOptions& options, bool read_only) {
  return Store::open(resolve_db_path(options.db), sql::OpenOptions{read_only, options.db_timeout_ms});
}

std::filesystem::path results_dir(const GlobalOptions& options) {
  const auto db = resolve_db_path(options.db);
  return db.has_parent_path() ? db.parent_path() : std::filesystem::path(".");
}

}  // namespace gpt::harness
