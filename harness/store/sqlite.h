#pragma once
// Thin RAII layer over the SQLite C API: one connection (Database), prepared statements (Statement) and
// transactions (Transaction). Every failure becomes a gpt::Error naming the database file; a locked
// database and a file that is not a database get messages of their own, since those are what users hit.
#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/check.h"

namespace gpt::harness::sql {

// The database stayed locked by another process for longer than the busy timeout: worth retrying later.
class BusyError : public gpt::Error {
 public:
  using gpt::Error::Error;
};

struct OpenOptions {
  bool read_only = false;
  int busy_timeout_ms = 5000;  // how long a writer waits for another process's lock before giving up
};

class Database;

// One prepared statement. Bind indices are 1-based (SQLite's convention); column indices are 0-based.
class Statement {
 public:
  Statement(Database& db, std::string_view sql);

  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, int value) { return bind(index, static_cast<std::int64_t>(value)); }
  Statement& bind(int index, double value);
  Statement& bind(int index, std::string_view value);
  Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
  Statement& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
  Statement& bind_null(int index);
  template <typename T>
  Statement& bind(int index, const std::optional<T>& value) {
    return value ? bind(index, *value) : bind_null(index);
  }

  // True when running it writes nothing: no table, no file (VACUUM INTO writes a new database file, even from a
  // read-only connection, so it is never read-only here).
  bool reads_only() const;

  bool step();  // true while a row is available
  void run();   // steps to completion (statements without result rows)
  void reset();

  int column_count() const;
  std::string column_name(int col) const;
  bool is_null(int col) const;
  std::int64_t column_int(int col) const;
  double column_double(int col) const;
  std::string column_text(int col) const;
  std::optional<std::int64_t> column_opt_int(int col) const;
  std::optional<double> column_opt_double(int col) const;
  int column_type(int col) const;  // SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_BLOB, SQLITE_NULL

 private:
  struct Finalizer {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  Database* db_;
  std::unique_ptr<sqlite3_stmt, Finalizer> stmt_;
  std::string sql_;
};

// A value from an arbitrary query (used by `harness query sql`).
using Value = std::variant<std::monostate, std::int64_t, double, std::string>;
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<Value>> rows;
};
std::string to_string(const Value& v);

class Database {
 public:
  // Opens (creating it and its folder unless read-only) the database at `path`, sets the busy timeout,
  // WAL journaling and foreign keys, and verifies that the file really is a SQLite database whose pages pass
  // `PRAGMA quick_check`. A read-only open never writes: a database in a folder we cannot write is opened
  // as immutable. Setting WAL mode on a new database is retried while another process holds it.
  static Database open(const std::filesystem::path& path, const OpenOptions& options = {});

  void exec(std::string_view sql);  // one or more statements without results
  void verify_integrity();          // throws unless PRAGMA quick_check says ok
  Statement prepare(std::string_view sql) { return Statement(*this, sql); }
  Table query(std::string_view sql);  // runs one statement and collects all rows
  std::int64_t last_insert_rowid() const;
  int changes() const;
  int user_version();
  void set_user_version(int version);

  const std::filesystem::path& path() const { return path_; }
  bool read_only() const { return read_only_; }
  int busy_timeout_ms() const { return busy_timeout_ms_; }
  sqlite3* handle() const { return db_.get(); }

  // Throws a gpt::Error for result code `rc` (which must be an error), with `context` saying what was done.
  [[noreturn]] void fail(int rc, std::string_view context) const;
  void check(int rc, std::string_view context) const {
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE) fail(rc, context);
  }

 private:
  struct Closer {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };
  Database(std::unique_ptr<sqlite3, Closer> db, std::filesystem::path path, bool read_only, int busy_timeout_ms)
      : db_(std::move(db)), path_(std::move(path)), read_only_(read_only), busy_timeout_ms_(busy_timeout_ms) {}
  std::unique_ptr<sqlite3, Closer> db_;
  std::filesystem::path path_;
  bool read_only_ = false;
  int busy_timeout_ms_ = 0;
};

// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed uncommitted (an exception unwinding past it). Inside
// another transaction it is a savepoint, so a caller can make many writes one atomic unit (an import).
class Transaction {
 public:
  explicit Transaction(Database& db);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Database& db_;
  bool nested_ = false;
  bool done_ = false;
};

}  // namespace gpt::harness::sql
