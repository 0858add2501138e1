#pragma once
// Rendering of query results: an aligned text table, CSV (RFC 4180 quoting) or a JSON array of objects.
#include <string>

#include "harness/store/sqlite.h"

namespace gpt::harness {

// format: "table", "csv" or "json" (throws on anything else).
std::string format_table(const sql::Table& table, const std::string& format);

}  // namespace gpt::harness
