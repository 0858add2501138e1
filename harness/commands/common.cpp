#include "harness/commands/common.h"

#include <iostream>

#include "harness/record/spool.h"
#include "kernels/check.h"

namespace gpt::harness {

void add_global_options(CLI::App& app, GlobalOptions& options) {
  options.db_option =
      app.add_option("--db", options.db, "results database (default: $SPEEDRUN_DB, else results/speedrun.db)")
          ->configurable(false);
  app.add_option("--db-timeout", options.db_timeout_ms, "milliseconds to wait for a locked database")
      ->check(CLI::NonNegativeNumber);
}

Store open_store(const GlobalOptions& options, bool read_only) {
  GPT_CHECK(!(options.db_option != nullptr && options.db_option->count() > 0 && options.db.empty()),
            "--db: the path is empty; give a database file, or leave --db out to use $SPEEDRUN_DB or ",
            kDefaultDbPath);
  Store store = Store::open(resolve_db_path(options.db), sql::OpenOptions{read_only, options.db_timeout_ms});
  if (!read_only) store_spooled_runs(store, results_dir(options) / "runs", &std::cerr);
  return store;
}

std::filesystem::path results_dir(const GlobalOptions& options) {
  const auto db = resolve_db_path(options.db);
  return db.has_parent_path() ? db.parent_path() : std::filesystem::path(".");
}

}  // namespace gpt::harness
