#include "harness/commands/check_db.h"

#include <iostream>

namespace gpt::harness {

namespace {

int run_check_db(GlobalOptions& global) {
  // Read-only: a damaged database is examined, never migrated or written. An older schema has no checksums.
  Store store = open_store(global, /*read_only=*/true);
  std::vector<std::string> integrity;
  auto pragma = store.db().prepare("PRAGMA integrity_check");
  while (pragma.step()) {
    const std::string line = pragma.column_text(0);
    if (line != "ok") integrity.push_back(line);
  }
  const Store::ChecksumReport sums = store.check_run_checksums();
  for (const auto& line : integrity) std::cout << "integrity: " << line << "\n";
  for (const auto& run : sums.mismatches) std::cout << "checksum mismatch: " << run << " changed since it was stored\n";
  std::cout << "check-db: " << sums.checked << " run(s) match their checksums, " << sums.mismatches.size()
            << " do not, " << sums.unchecked << " stored before checksums were kept (not checked); SQLite integrity "
            << (integrity.empty() ? "ok" : "FAILED") << "\n";
  return integrity.empty() && sums.mismatches.empty() ? kExitPass : kExitFail;
}

}  // namespace

void add_check_db_command(CLI::App& app, GlobalOptions& global) {
  CLI::App* sub = app.add_subcommand("check-db", "check the results database: SQLite integrity and run checksums");
  sub->callback([&global] { global.exit_code = run_check_db(global); });
}

}  // namespace gpt::harness
