#include "harness/store/sqlite.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <system_error>
#include <thread>

#include "base/check.h"

namespace gpt::harness::sql {

void Database::fail(int rc, std::string_view context) const {
  const int primary = rc & 0xff;
  const std::string where = "database '" + path_.string() + "'";
  if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    throw BusyError(where + " is locked by another process (gave up after " + std::to_string(busy_timeout_ms_) +
                    " ms while trying to " + std::string(context) +
                    "); wait for the other harness to finish or raise --db-timeout");
  }
  if (primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT) {
    GPT_FAIL(where, " is not a valid SQLite database (corrupt, or another kind of file): ", context, ": ",
             sqlite3_errstr(rc));
  }
  if (primary == SQLITE_READONLY) {
    GPT_FAIL(where, " is read-only here (", context, "): ", db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc));
  }
  GPT_FAIL(where, ": ", context, ": ", db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc));
}

namespace {

// Runs `step` until it stops reporting a busy database, backing off up to the busy timeout. Some statements
// (changing the journal mode of a brand-new file) fail at once instead of waiting in SQLite's busy handler.
template <typename Step>
void retry_while_busy(int busy_timeout_ms, Step step) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(busy_timeout_ms);
  auto pause = std::chrono::milliseconds(5);
  while (true) {
    try {
      step();
      return;
    } catch (const BusyError&) {
      if (std::chrono::steady_clock::now() >= deadline) throw;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
  }
}

}  // namespace

Database Database::open(const std::filesystem::path& path, const OpenOptions& options) {
  GPT_CHECK(!path.empty(), "--db: the database path is empty");
  std::error_code status_error;
  const auto status = std::filesystem::status(path, status_error);
  // A folder is named as one (it was "no database at"), and so is an empty file: SQLite reads zero bytes as an empty
  // database, which a reading command then called "schema version 0, needs migrating".
  GPT_CHECK(!std::filesystem::is_directory(status), "--db: '", path.string(), "' is a folder, not a database file");
  if (options.read_only) {
    GPT_CHECK(std::filesystem::is_regular_file(status), "--db: no database at '", path.string(),
              "' (reading commands never create one; check the path or run `harness record` first)");
    std::error_code size_error;
    GPT_CHECK(std::filesystem::file_size(path, size_error) > 0 || size_error, "--db: '", path.string(),
              "' is an empty file, not a database (reading commands never create one; remove it, or run a writing "
              "command such as `harness record` to start a database there)");
  } else if (path.has_parent_path()) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    GPT_CHECK(!ec, "--db: cannot create folder '", path.parent_path().string(), "': ", ec.message());
  }
  auto connect = [&](bool immutable) {
    sqlite3* raw = nullptr;
    const int flags = (options.read_only ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) |
                      SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI;
    // A URI keeps odd characters in the path literal ('?' and '#' must be escaped, '%' too).
    std::string uri = "file:";
    for (char c : std::filesystem::absolute(path).string()) {
      if (c == '?' || c == '#' || c == '%') {
        char hex[4];
        std::snprintf(hex, sizeof hex, "%%%02X", static_cast<unsigned char>(c));
        uri += hex;
      } else {
        uri += c;
      }
    }
    if (immutable) uri += "?immutable=1";
    const int rc = sqlite3_open_v2(uri.c_str(), &raw, flags, nullptr);
    std::unique_ptr<sqlite3, Closer> handle(raw);
    Database db(std::move(handle), path, options.read_only, options.busy_timeout_ms);
    if (rc != SQLITE_OK) db.fail(rc, "open");
    sqlite3_extended_result_codes(db.handle(), 1);
    db.check(sqlite3_busy_timeout(db.handle(), options.busy_timeout_ms), "set the busy timeout");
    // Reading the schema is the first access to the file: this is where a corrupt file shows itself.
    db.exec("SELECT count(*) FROM sqlite_master");
    return db;
  };
  std::optional<Database> opened;
  try {
    opened.emplace(connect(false));
  } catch (const BusyError&) {
    throw;
  } catch (const gpt::Error&) {
    // A read-only WAL database in a folder we may not write (no -shm file can be made): read it as immutable.
    if (!options.read_only) throw;
    opened.emplace(connect(true));
  }
  Database db = std::move(*opened);
  if (!options.read_only) {
    retry_while_busy(options.busy_timeout_ms, [&] { db.exec("PRAGMA journal_mode=WAL"); });
    // In WAL mode NORMAL keeps every committed run across a crash or kill of the harness; only an OS crash
    // or power loss may drop the last commits.
    db.exec("PRAGMA synchronous=NORMAL");
  } else {
    db.exec("PRAGMA query_only=1");
  }
  db.exec("PRAGMA foreign_keys=ON");
  db.verify_integrity();
  return db;
}

void Database::verify_integrity() {
  // quick_check reads every page (not the index/table cross-checks of integrity_check): page-level damage
  // shows here instead of as garbled rows later or as new writes into a broken file.
  Statement check = prepare("PRAGMA quick_check(5)");
  std::string problems;
  while (check.step()) {
    const std::string line = check.column_text(0);
    if (line == "ok") return;
    problems += (problems.empty() ? "" : "; ") + line;
  }
  GPT_FAIL("database '", path_.string(), "' fails its integrity check (PRAGMA quick_check): ", problems,
           ". Nothing was read or written; restore it from a backup or salvage it with `sqlite3 ", path_.string(),
           " .recover`");
}

void Database::exec(std::string_view sql) {
  std::string text(sql);
  char* message = nullptr;
  const int rc = sqlite3_exec(db_.get(), text.c_str(), nullptr, nullptr, &message);
  std::unique_ptr<char, decltype(&sqlite3_free)> owned(message, &sqlite3_free);
  if (rc != SQLITE_OK) fail(rc, "run '" + text.substr(0, 60) + "'");
}

Table Database::query(std::string_view sql) {
  Statement stmt = prepare(sql);
  Table table;
  for (int c = 0; c < stmt.column_count(); ++c) table.columns.push_back(stmt.column_name(c));
  while (stmt.step()) {
    std::vector<Value> row;
    for (int c = 0; c < stmt.column_count(); ++c) {
      switch (stmt.column_type(c)) {
        case SQLITE_NULL:
          row.emplace_back(std::monostate{});
          break;
        case SQLITE_INTEGER:
          row.emplace_back(stmt.column_int(c));
          break;
        case SQLITE_FLOAT:
          row.emplace_back(stmt.column_double(c));
          break;
        default:
          row.emplace_back(stmt.column_text(c));
          break;
      }
    }
    table.rows.push_back(std::move(row));
  }
  return table;
}

std::int64_t Database::last_insert_rowid() const { return sqlite3_last_insert_rowid(db_.get()); }
int Database::changes() const { return sqlite3_changes(db_.get()); }

int Database::user_version() {
  Statement stmt = prepare("PRAGMA user_version");
  GPT_CHECK(stmt.step(), "database '", path_.string(), "': PRAGMA user_version returned nothing");
  return static_cast<int>(stmt.column_int(0));
}

void Database::set_user_version(int version) { exec("PRAGMA user_version=" + std::to_string(version)); }

Statement::Statement(Database& db, std::string_view sql) : db_(&db), sql_(sql) {
  sqlite3_stmt* raw = nullptr;
  const char* tail = nullptr;
  const int rc = sqlite3_prepare_v2(db.handle(), sql_.data(), static_cast<int>(sql_.size()), &raw, &tail);
  stmt_.reset(raw);
  if (rc != SQLITE_OK) db.fail(rc, "prepare '" + sql_.substr(0, 80) + "'");
  GPT_CHECK(stmt_ != nullptr, "database '", db.path().string(), "': empty SQL statement");
  // A statement runs alone: what follows it (`SELECT 1; DELETE ...`) was silently never run. Whitespace and
  // comments prepare to nothing and may follow.
  const std::string_view rest(tail, static_cast<size_t>(sql_.data() + sql_.size() - tail));
  sqlite3_stmt* next = nullptr;
  const int next_rc = sqlite3_prepare_v2(db.handle(), rest.data(), static_cast<int>(rest.size()), &next, nullptr);
  sqlite3_finalize(next);
  GPT_CHECK(next_rc == SQLITE_OK && next == nullptr, "database '", db.path().string(),
            "': one SQL statement at a time; another follows the first: '", std::string(rest.substr(0, 80)), "'");
}

bool Statement::reads_only() const {
  if (sqlite3_stmt_readonly(stmt_.get()) == 0) return false;
  size_t at = sql_.find_first_not_of(" \t\r\n");
  const std::string head = at == std::string::npos ? "" : sql_.substr(at, 6);
  return !(head.size() == 6 && std::equal(head.begin(), head.end(), "VACUUM", [](char a, char b) {
             return std::toupper(static_cast<unsigned char>(a)) == b;
           }));
}

Statement& Statement::bind(int index, std::int64_t value) {
  db_->check(sqlite3_bind_int64(stmt_.get(), index, value), "bind a parameter");
  return *this;
}
Statement& Statement::bind(int index, double value) {
  db_->check(sqlite3_bind_double(stmt_.get(), index, value), "bind a parameter");
  return *this;
}
Statement& Statement::bind(int index, std::string_view value) {
  db_->check(sqlite3_bind_text(stmt_.get(), index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT),
             "bind a parameter");
  return *this;
}
Statement& Statement::bind_null(int index) {
  db_->check(sqlite3_bind_null(stmt_.get(), index), "bind a parameter");
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail(rc, "run '" + sql_.substr(0, 80) + "'");
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
}

int Statement::column_count() const { return sqlite3_column_count(stmt_.get()); }
std::string Statement::column_name(int col) const {
  const char* name = sqlite3_column_name(stmt_.get(), col);
  return name ? name : "";
}
bool Statement::is_null(int col) const { return sqlite3_column_type(stmt_.get(), col) == SQLITE_NULL; }
std::int64_t Statement::column_int(int col) const { return sqlite3_column_int64(stmt_.get(), col); }
double Statement::column_double(int col) const { return sqlite3_column_double(stmt_.get(), col); }
std::string Statement::column_text(int col) const {
  const auto* text = sqlite3_column_text(stmt_.get(), col);
  return text ? std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(stmt_.get(), col)) : "";
}
std::optional<std::int64_t> Statement::column_opt_int(int col) const {
  if (is_null(col)) return std::nullopt;
  return column_int(col);
}
std::optional<double> Statement::column_opt_double(int col) const {
  if (is_null(col)) return std::nullopt;
  return column_double(col);
}
int Statement::column_type(int col) const { return sqlite3_column_type(stmt_.get(), col); }

std::string to_string(const Value& v) {
  if (std::holds_alternative<std::monostate>(v)) return "";
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.10g", *d);
    return buf;
  }
  return std::get<std::string>(v);
}

Transaction::Transaction(Database& db) : db_(db), nested_(sqlite3_get_autocommit(db.handle()) == 0) {
  db_.exec(nested_ ? "SAVEPOINT nested" : "BEGIN IMMEDIATE");
}
Transaction::~Transaction() {
  if (done_) return;
  if (nested_) {
    sqlite3_exec(db_.handle(), "ROLLBACK TO nested; RELEASE nested", nullptr, nullptr, nullptr);
  } else {
    sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  }
}
void Transaction::commit() {
  db_.exec(nested_ ? "RELEASE nested" : "COMMIT");
  done_ = true;
}

}  // namespace gpt::harness::sql
