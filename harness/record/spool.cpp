#include "harness/record/spool.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "harness/launcher/atomic_file.h"
#include "base/check.h"
#include "base/file_read.h"

namespace gpt::harness {

namespace {

using nlohmann::json;

template <typename T>
json opt(const std::optional<T>& v) {
  if (!v) return nullptr;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(*v)) return std::isnan(*v) ? json("nan") : json(*v > 0 ? "inf" : "-inf");
  }
  return json(*v);
}

std::optional<double> get_double(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  const json& v = j.at(key);
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "nan") return std::nan("");
    return s == "-inf" ? -INFINITY : INFINITY;
  }
  return v.get<double>();
}

std::optional<std::int64_t> get_int(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<std::int64_t>();
}

json environment_json(const Environment& e) {
  return {{"gpu", e.gpu},
          {"driver", e.driver},
          {"cuda", e.cuda},
          {"nccl", e.nccl},
          {"cpu_model", e.cpu_model},
          {"compiler", e.compiler},
          {"build_flags", e.build_flags},
          {"git_commit", e.git_commit},
          {"git_dirty", e.git_dirty},
          {"hostname", e.hostname}};
}

Environment environment_from(const json& j) {
  Environment e;
  e.gpu = j.value("gpu", "");
  e.driver = j.value("driver", "");
  e.cuda = j.value("cuda", "");
  e.nccl = j.value("nccl", "");
  e.cpu_model = j.value("cpu_model", "");
  e.compiler = j.value("compiler", "");
  e.build_flags = j.value("build_flags", "");
  e.git_commit = j.value("git_commit", "");
  e.git_dirty = j.value("git_dirty", false);
  e.hostname = j.value("hostname", "");
  return e;
}

}  // namespace

void write_spool(const std::filesystem::path& path, const RunRecord& r, const std::string& database_id) {
  json points = json::array();
  for (const auto& p : r.val_points)
    points.push_back(
        {{"step", p.step}, {"val_loss", opt(std::optional(p.val_loss))}, {"train_time_ms", opt(p.train_time_ms)}});
  json doc = {{"sweep_id", r.sweep_id},
              {"arm", r.arm},
              {"seed", opt(r.seed)},
              {"run_id", r.run_id},
              {"status", to_string(r.status)},
              {"exit_code", opt(r.exit_code)},
              {"final_val_loss", opt(r.final_val_loss)},
              {"train_time_ms", opt(r.train_time_ms)},
              {"steps", opt(r.steps)},
              {"total_steps", opt(r.total_steps)},
              {"tokens", opt(r.tokens)},
              {"peak_memory_mib", opt(r.peak_memory_mib)},
              {"log_path", r.log_path},
              {"reason", r.reason},
              {"wall_time_s", opt(r.wall_time_s)},
              {"environment_id", opt(r.environment_id)},
              {"val_points", points},
              {"params", r.params}};
  if (r.environment) doc["environment"] = environment_json(*r.environment);
  if (!database_id.empty()) doc["database_id"] = database_id;
  write_text_atomically(path, doc.dump(1) + "\n");
}

RunRecord read_spool(const std::filesystem::path& path) { return read_spool_file(path).run; }

SpoolFile read_spool_file(const std::filesystem::path& path) {
  const std::string text = read_file(path, "spool file");
  try {
    const json doc = json::parse(text);
    SpoolFile file;
    file.database_id = doc.value("database_id", "");
    RunRecord& r = file.run;
    r.sweep_id = doc.at("sweep_id").get<std::int64_t>();
    r.arm = doc.value("arm", "");
    r.seed = get_int(doc, "seed");
    r.run_id = doc.at("run_id").get<std::string>();
    r.status = parse_run_status(doc.at("status").get<std::string>());
    if (auto code = get_int(doc, "exit_code")) r.exit_code = static_cast<int>(*code);
    r.final_val_loss = get_double(doc, "final_val_loss");
    r.train_time_ms = get_double(doc, "train_time_ms");
    r.steps = get_int(doc, "steps");
    r.total_steps = get_int(doc, "total_steps");
    r.tokens = get_int(doc, "tokens");
    r.peak_memory_mib = get_double(doc, "peak_memory_mib");
    r.log_path = doc.value("log_path", "");
    r.reason = doc.value("reason", "");
    r.wall_time_s = get_double(doc, "wall_time_s");
    r.environment_id = get_int(doc, "environment_id");
    for (const json& p : doc.at("val_points")) {
      r.val_points.push_back({p.at("step").get<std::int64_t>(), get_double(p, "val_loss").value_or(std::nan("")),
                              get_double(p, "train_time_ms")});
    }
    if (doc.contains("params")) r.params = doc.at("params").get<std::map<std::string, std::string>>();
    if (doc.contains("environment")) r.environment = environment_from(doc.at("environment"));
    return file;
  } catch (const json::exception& e) {
    GPT_FAIL("spool file '", path.string(), "' is damaged: ", e.what());
  }
}

std::optional<std::int64_t> add_run_with_retry(Store& store, const RunRecord& run, const InsertRetry& retry) {
  auto pause = retry.first_pause;
  for (int attempt = 1;; ++attempt) {
    try {
      return store.add_run(run, /*replace=*/true);
    } catch (const sql::BusyError&) {
      if (attempt >= retry.attempts) return std::nullopt;
      std::this_thread::sleep_for(pause);
      pause *= 2;
    }
  }
}

bool spool_and_store(Store& store, const std::filesystem::path& out_dir, const RunRecord& run,
                     const InsertRetry& retry) {
  const auto spool = out_dir / kSpoolFileName;
  write_spool(spool, run, store.database_id());
  if (!add_run_with_retry(store, run, retry)) return false;
  std::filesystem::remove(spool);
  return true;
}

int store_spooled_runs(Store& store, const std::filesystem::path& runs_root) {
  std::error_code ec;
  if (!std::filesystem::is_directory(runs_root, ec)) return 0;
  int stored = 0;
  for (const auto& sweep_dir : std::filesystem::directory_iterator(runs_root, ec)) {
    if (!sweep_dir.is_directory()) continue;
    for (const auto& run_dir : std::filesystem::directory_iterator(sweep_dir.path(), ec)) {
      const auto spool = run_dir.path() / kSpoolFileName;
      if (!run_dir.is_directory() || !std::filesystem::exists(spool)) continue;
      try {
        const SpoolFile file = read_spool_file(spool);
        const RunRecord& run = file.run;
        if (!file.database_id.empty() && file.database_id != store.database_id()) {
          spdlog::warn("spooled run '{}' belongs to another database (identity {}); left in place", spool.string(),
                       file.database_id);
          continue;
        }
        const auto sweep = store.find_sweep(std::to_string(run.sweep_id));
        if (!sweep || sweep->name != sweep_dir.path().filename().string()) {
          spdlog::warn("spooled run '{}' belongs to sweep {}, which this database does not hold; left in place",
                       spool.string(), run.sweep_id);
          continue;
        }
        store.add_run(run, /*replace=*/true);
        std::filesystem::remove(spool);
        ++stored;
        spdlog::info("stored spooled run {} ({}) from '{}'", run.run_id, to_string(run.status), spool.string());
      } catch (const sql::BusyError&) {
        throw;
      } catch (const gpt::Error& e) {
        spdlog::warn("could not store spooled run '{}': {}", spool.string(), e.what());
      }
    }
  }
  return stored;
}

}  // namespace gpt::harness
