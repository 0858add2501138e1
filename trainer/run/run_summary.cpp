#include "trainer/run/run_summary.h"

#include <cmath>

#include "trainer/run/checkpoint.h"

namespace gpt {

namespace {

nlohmann::json loss_or_null(double loss) { return std::isfinite(loss) ? nlohmann::json(loss) : nlohmann::json(); }

nlohmann::json history_json(const std::vector<ValPoint>& history) {
  nlohmann::json out = nlohmann::json::array();
  for (const ValPoint& p : history) {
    out.push_back({{"step", p.step}, {"val_loss", loss_or_null(p.val_loss)}, {"train_time_ms", p.train_time_ms}});
  }
  return out;
}

nlohmann::json stage_times_json(const std::vector<StageTime>& stages) {
  nlohmann::json out = nlohmann::json::array();
  for (const StageTime& t : stages) {
    out.push_back({{"stage", t.stage},
                   {"first_step", t.first_step},
                   {"steps", t.steps},
                   {"train_time_ms", t.train_time_ms},
                   {"ms_per_step", t.steps > 0 ? t.train_time_ms / static_cast<double>(t.steps) : 0.0}});
  }
  return out;
}

}  // namespace

nlohmann::json RunSummary::to_json() const {
  const RunResult& r = result;
  nlohmann::json j = {
      {"schema_version", kRunSummarySchemaVersion},
      {"run_id", run_id},
      {"seed", seed},
      {"recipe", {{"name", recipe_name}, {"hash", recipe_hash}}},
      {"status", status_name(r.status)},
      {"final_val_loss", r.final_val_loss ? loss_or_null(*r.final_val_loss) : nlohmann::json()},
      {"train_time_ms", r.train_time_ms},
      {"steps", r.steps},
      {"total_steps", r.total_steps},
      {"tokens", r.tokens},
      {"train_data", {{"cycled", r.train_data_cycled}, {"passes", r.train_data_passes}}},
      {"val_history", history_json(r.val_history)},
      {"stage_times", stage_times_json(r.stage_times)},
      {"peak_memory", {{"allocated_mib", peak_memory.allocated}, {"reserved_mib", peak_memory.reserved}}},
      {"world_size", world_size},
      {"backend", backend},
      {"git_commit", environment.git_commit},
      {"git_dirty", environment.git_dirty},
      {"environment", environment.to_json()},
  };
  if (r.status != RunStatus::finished) j["error"] = r.error;
  return j;
}

void write_run_summary(const std::filesystem::path& path, const RunSummary& summary) {
  write_file_atomically(path, summary.to_json().dump(2) + "\n");
}

nlohmann::json CheckpointMeta::to_json() const {
  nlohmann::json j = {{"run_id", run_id},
                      {"seed", seed},
                      {"recipe", {{"name", recipe_name}, {"hash", recipe_hash}}},
                      {"world_size", world_size},
                      {"rank", rank},
                      {"next_step", next_step},
                      {"loader", loader},
                      {"train_time_ms", train_time_ms},
                      {"tokens", tokens},
                      {"val_history", history_json(val_history)},
                      {"optimizer", {{"adam_steps", counters.adam_steps}, {"tied", counters.tied}}}};
  if (data) j["data"] = data->to_json();
  return j;
}

CheckpointMeta CheckpointMeta::from_json(const nlohmann::json& j, const std::string& source) {
  CheckpointMeta m;
  try {
    m.run_id = j.at("run_id").get<std::string>();
    m.seed = j.at("seed").get<uint64_t>();
    m.recipe_name = j.at("recipe").at("name").get<std::string>();
    m.recipe_hash = j.at("recipe").at("hash").get<std::string>();
    m.world_size = j.at("world_size").get<int>();
    m.rank = j.value("rank", 0);  // absent in checkpoints written before per-rank files
    m.next_step = j.at("next_step").get<int64_t>();
    m.loader = j.at("loader").get<LoaderPosition>();
    m.train_time_ms = j.at("train_time_ms").get<double>();
    m.tokens = j.at("tokens").get<int64_t>();
    for (const auto& p : j.at("val_history")) {
      const auto& loss = p.at("val_loss");
      m.val_history.push_back({p.at("step").get<int64_t>(), loss.is_null() ? std::nan("") : loss.get<double>(),
                               p.at("train_time_ms").get<double>()});
    }
    m.counters.adam_steps = j.at("optimizer").at("adam_steps").get<std::map<std::string, int64_t>>();
    m.counters.tied = j.at("optimizer").at("tied").get<bool>();
    if (j.contains("data")) m.data = CorpusFingerprint::from_json(j.at("data"), source);
  } catch (const nlohmann::json::exception& e) {
    GPT_FAIL("checkpoint '", source, "': metadata is incomplete or mistyped: ", e.what());
  }
  return m;
}

}  // namespace gpt
