#include "harness/store/schema.h"

#include "base/check.h"

namespace gpt::harness {

namespace {

// Migration i takes the schema from version i to i+1. Append new migrations; never edit a published one.
constexpr std::string_view kMigrations[] = {
    // v1: the initial schema.
    R"sql(
CREATE TABLE environments (
  id INTEGER PRIMARY KEY,
  fingerprint TEXT NOT NULL UNIQUE,
  gpu TEXT NOT NULL DEFAULT '',
  driver TEXT NOT NULL DEFAULT '',
  cuda TEXT NOT NULL DEFAULT '',
  nccl TEXT NOT NULL DEFAULT '',
  cpu_model TEXT NOT NULL DEFAULT '',
  compiler TEXT NOT NULL DEFAULT '',
  build_flags TEXT NOT NULL DEFAULT '',
  git_commit TEXT NOT NULL DEFAULT '',
  git_dirty INTEGER NOT NULL DEFAULT 0,
  hostname TEXT NOT NULL DEFAULT '',
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))
);
CREATE TABLE sweeps (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  kind TEXT NOT NULL,
  recipe TEXT NOT NULL DEFAULT '',
  command TEXT NOT NULL DEFAULT '',
  target REAL,
  alpha REAL,
  runs_planned INTEGER NOT NULL DEFAULT 0,
  gpus INTEGER NOT NULL DEFAULT 0,
  environment_id INTEGER REFERENCES environments(id),
  created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))
);
CREATE TABLE runs (
  id INTEGER PRIMARY KEY,
  sweep_id INTEGER NOT NULL REFERENCES sweeps(id) ON DELETE CASCADE,
  arm TEXT NOT NULL DEFAULT '',
  seed INTEGER,
  run_id TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('ok','failed','diverged','timeout','killed','incomplete')),
  exit_code INTEGER,
  final_val_loss REAL,
  train_time_ms REAL,
  steps INTEGER,
  total_steps INTEGER,
  tokens INTEGER,
  peak_memory_mib REAL,
  log_path TEXT NOT NULL DEFAULT '',
  reason TEXT NOT NULL DEFAULT '',
  wall_time_s REAL,
  environment_id INTEGER REFERENCES environments(id),
  finished_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),
  UNIQUE (sweep_id, arm, seed)
);
CREATE INDEX runs_by_sweep ON runs(sweep_id, arm);
CREATE TABLE val_points (
  run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step INTEGER NOT NULL,
  val_loss REAL NOT NULL,
  train_time_ms REAL,
  PRIMARY KEY (run, step)
);
CREATE TABLE benchmark_results (
  id INTEGER PRIMARY KEY,
  suite TEXT NOT NULL,
  name TEXT NOT NULL,
  run INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  revision TEXT NOT NULL DEFAULT '',
  value REAL NOT NULL,
  unit TEXT NOT NULL DEFAULT '',
  repetitions INTEGER NOT NULL DEFAULT 1,
  recorded_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),
  environment_id INTEGER REFERENCES environments(id)
);
CREATE INDEX benchmark_history ON benchmark_results(suite, name, recorded_at);
CREATE TABLE params (
  owner_kind TEXT NOT NULL CHECK (owner_kind IN ('sweep','run','benchmark')),
  owner_id INTEGER NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (owner_kind, owner_id, key)
);
CREATE TABLE metrics (
  owner_kind TEXT NOT NULL CHECK (owner_kind IN ('sweep','run','benchmark')),
  owner_id INTEGER NOT NULL,
  key TEXT NOT NULL,
  value REAL NOT NULL,
  PRIMARY KEY (owner_kind, owner_id, key)
);
CREATE TABLE tags (
  owner_kind TEXT NOT NULL CHECK (owner_kind IN ('sweep','run','benchmark')),
  owner_id INTEGER NOT NULL,
  tag TEXT NOT NULL,
  PRIMARY KEY (owner_kind, owner_id, tag)
);
)sql",
    // v2: a checksum of each run's stored values and validation points (Store::check_run_checksums): a byte
    // flipped inside a row passes SQLite's own checks. Rows stored before it keep '' (not checked).
    R"sql(
ALTER TABLE runs ADD COLUMN checksum TEXT NOT NULL DEFAULT '';
)sql",
    // v3: slowdowns the nightly job reported, tracked from the night they were found (open, confirmed, resolved).
    R"sql(
CREATE TABLE change_points (
  id INTEGER PRIMARY KEY,
  suite TEXT NOT NULL,
  name TEXT NOT NULL,
  gpu TEXT NOT NULL DEFAULT '',
  start_night TEXT NOT NULL,
  start_commit TEXT NOT NULL DEFAULT '',
  found_night TEXT NOT NULL,
  found_commit TEXT NOT NULL DEFAULT '',
  before_mean REAL NOT NULL,
  relative REAL NOT NULL,
  min_effect REAL NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('open','confirmed','resolved')),
  resolved_night TEXT NOT NULL DEFAULT '',
  UNIQUE (suite, name, gpu, start_night)
);
)sql",
    // v4: a random identity of the database, written into spool files (harness/record/spool.h), so that a run left
    // spooled in a runs folder two databases share is stored only into the database it was made for.
    R"sql(
CREATE TABLE store_identity (id TEXT NOT NULL);
INSERT INTO store_identity (id) VALUES (lower(hex(randomblob(16))));
)sql",
};

}  // namespace

int latest_schema_version() { return static_cast<int>(std::size(kMigrations)); }

void migrate(sql::Database& db) {
  const int latest = latest_schema_version();
  int version = db.user_version();
  GPT_CHECK(version <= latest, "database '", db.path().string(), "' has schema version ", version,
            ", newer than this harness understands (", latest, "); use a newer harness");
  if (version == latest) return;
  GPT_CHECK(!db.read_only(), "database '", db.path().string(), "' has schema version ", version,
            " and needs migrating to ", latest, "; a writing command (record, import, nightly) migrates it");
  while (version < latest) {
    sql::Transaction tx(db);
    // Re-read inside the write lock: another process may have migrated meanwhile.
    version = db.user_version();
    if (version >= latest) break;
    db.exec(kMigrations[version]);
    db.set_user_version(version + 1);
    tx.commit();
    ++version;
  }
}

}  // namespace gpt::harness
