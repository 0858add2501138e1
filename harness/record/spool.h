#pragma once
// Nothing finished is lost: a finished run is first written to a spool file in its run folder, then
// inserted into the database (retrying while another process holds it); the spool file is removed once
// the run is stored. A run whose insert never succeeded stays spooled, and the next harness command that
// writes to the database (or `record --resume`) stores it.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "harness/store/store.h"

namespace gpt::harness {

inline constexpr const char* kSpoolFileName = "run.spool.json";

// A spool file: the run, and the identity of the database it is to be stored into (Store::database_id; empty in
// files written before databases had one).
struct SpoolFile {
  RunRecord run;
  std::string database_id;
};

// Writes `run` (with its val points and provenance) and the database it belongs to to `path` atomically (a
// temporary file renamed).
void write_spool(const std::filesystem::path& path, const RunRecord& run, const std::string& database_id);
SpoolFile read_spool_file(const std::filesystem::path& path);
RunRecord read_spool(const std::filesystem::path& path);

struct InsertRetry {
  int attempts = 6;
  std::chrono::milliseconds first_pause{250};  // doubled after each busy attempt
};

// add_run(run, replace=true), retried with backoff while the database is locked. Returns the run's id, or
// nullopt when it stayed locked through every attempt (the caller keeps the spool file).
std::optional<std::int64_t> add_run_with_retry(Store& store, const RunRecord& run, const InsertRetry& retry = {});

// Spool first, then insert: writes `run` to out_dir/run.spool.json, inserts it with add_run_with_retry and
// removes the spool file once stored. Returns false when the database stayed locked (the run stays spooled).
bool spool_and_store(Store& store, const std::filesystem::path& out_dir, const RunRecord& run,
                     const InsertRetry& retry = {});

// Stores every spool file found in `runs_root/<sweep>/<run>/` that names this database (or, written before
// databases had an identity, whose sweep id and folder name match one of its sweeps), removing each file once stored;
// logs each (info; a file left in place: warn). Returns how many runs were stored. A spool file that cannot be read is
// reported and left in place.
int store_spooled_runs(Store& store, const std::filesystem::path& runs_root);

}  // namespace gpt::harness
