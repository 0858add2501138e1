#pragma once
// The results database schema: versioned through `PRAGMA user_version`, upgraded by forward migrations.
#include "harness/store/sqlite.h"

namespace gpt::harness {

int latest_schema_version();

// Brings the database to the latest schema version, one transaction per migration. Throws if the file was
// written by a newer harness, or if it is opened read-only and needs migrating.
void migrate(sql::Database& db);

}  // namespace gpt::harness
