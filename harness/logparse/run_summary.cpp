#include "harness/logparse/run_summary.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/store/run_checks.h"
#include "base/check.h"
#include "base/file_read.h"

namespace gpt::harness {

namespace {

using nlohmann::json;

struct Reader {
  const std::string& source;

  [[noreturn]] void wrong(const std::string& field, const char* expected) const {
    GPT_FAIL("run summary '", source, "': field '", field, "' should be ", expected);
  }

  std::optional<double> loss(const json& obj, const std::string& field) const {
    if (!obj.contains(field)) return std::nullopt;
    const json& v = obj.at(field);
    if (v.is_number()) {
      const double x = v.get<double>();
      if (auto problem = loss_problem(x)) GPT_FAIL("run summary '", source, "': field '", field, "' ", *problem);
      return x;
    }
    if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      if (s == "nan" || s == "NaN") return std::numeric_limits<double>::quiet_NaN();
      if (s == "inf" || s == "Infinity") return std::numeric_limits<double>::infinity();
      if (s == "-inf" || s == "-Infinity") return -std::numeric_limits<double>::infinity();
    }
    wrong(field, "a number (or null/\"nan\"/\"inf\")");
  }

  std::optional<double> number(const json& obj, const std::string& field) const {
    if (!obj.contains(field) || obj.at(field).is_null()) return std::nullopt;
    if (!obj.at(field).is_number()) wrong(field, "a number");
    return obj.at(field).get<double>();
  }

  std::optional<std::int64_t> integer(const json& obj, const std::string& field) const {
    if (!obj.contains(field) || obj.at(field).is_null()) return std::nullopt;
    if (!obj.at(field).is_number_integer()) wrong(field, "an integer");
    return obj.at(field).get<std::int64_t>();
  }

  // A count (steps, tokens, passes, world size): an integer >= 0 (>= 1 where `at_least_one`).
  std::optional<std::int64_t> count(const json& obj, const std::string& field, bool at_least_one = false) const {
    const auto v = integer(obj, field);
    if (v && *v < (at_least_one ? 1 : 0)) wrong(field, at_least_one ? "an integer >= 1" : "an integer >= 0");
    return v;
  }

  std::string text(const json& obj, const std::string& field) const {
    if (!obj.contains(field) || obj.at(field).is_null()) return "";
    if (!obj.at(field).is_string()) wrong(field, "a string");
    return obj.at(field).get<std::string>();
  }
};

}  // namespace

RunSummary parse_run_summary(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers beyond double (1e400)
    GPT_FAIL("run summary '", source, "' is not valid JSON: ", e.what());
  }
  GPT_CHECK(doc.is_object(), "run summary '", source, "' should hold a JSON object");
  const Reader r{source};
  RunSummary s;
  if (auto v = r.integer(doc, "schema_version")) s.schema_version = static_cast<int>(*v);
  s.run_id = r.text(doc, "run_id");
  s.seed = r.integer(doc, "seed");
  if (doc.contains("recipe") && doc.at("recipe").is_object()) {
    s.recipe = r.text(doc.at("recipe"), "name");
    s.recipe_hash = r.text(doc.at("recipe"), "hash");
  } else {
    s.recipe = r.text(doc, "recipe");
  }
  s.status = r.text(doc, "status");
  s.final_val_loss = r.loss(doc, "final_val_loss");
  s.train_time_ms = r.number(doc, "train_time_ms");
  s.steps = r.count(doc, "steps");
  s.total_steps = r.count(doc, "total_steps", /*at_least_one=*/true);
  if (auto problem = steps_problem(s.steps, s.total_steps)) GPT_FAIL("run summary '", source, "': ", *problem);
  s.tokens = r.count(doc, "tokens");
  if (doc.contains("train_data")) {
    const json& data = doc.at("train_data");
    if (!data.is_object()) r.wrong("train_data", "an object {cycled, passes}");
    if (data.contains("cycled")) {
      if (!data.at("cycled").is_boolean()) r.wrong("train_data.cycled", "true or false");
      s.train_data_cycled = data.at("cycled").get<bool>();
    }
    s.train_data_passes = r.count(data, "passes");
  }
  if (doc.contains("val_history")) {
    const json& history = doc.at("val_history");
    if (!history.is_array()) r.wrong("val_history", "an array of {step, val_loss, train_time_ms}");
    for (const json& point : history) {
      if (!point.is_object()) r.wrong("val_history", "an array of {step, val_loss, train_time_ms}");
      auto step = r.count(point, "step");
      auto loss = r.loss(point, "val_loss");
      if (!step || !loss) r.wrong("val_history", "entries with both step and val_loss");
      s.val_history.push_back({*step, *loss, r.number(point, "train_time_ms"), /*val_loss_decimals=*/-1});
    }
  }
  s.peak_memory_mib = r.number(doc, "peak_memory_mib");
  if (!s.peak_memory_mib && doc.contains("peak_memory") && doc.at("peak_memory").is_object()) {
    s.peak_memory_mib = r.number(doc.at("peak_memory"), "allocated_mib");
  }
  if (auto v = r.count(doc, "world_size", /*at_least_one=*/true)) s.world_size = static_cast<int>(*v);
  s.backend = r.text(doc, "backend");
  if (doc.contains("environment") && doc.at("environment").is_object()) {
    const json& e = doc.at("environment");
    Environment env;
    env.gpu = r.text(e, "gpu");
    env.driver = r.text(e, "driver");
    env.cuda = r.text(e, "cuda");
    env.nccl = r.text(e, "nccl");
    env.cpu_model = r.text(e, "cpu");
    env.compiler = r.text(e, "compiler");
    env.build_flags = r.text(e, "build_flags");
    env.git_commit = r.text(e, "git_commit");
    if (env.git_commit.empty()) env.git_commit = r.text(doc, "git_commit");
    env.git_dirty = e.contains("git_dirty") && e.at("git_dirty").is_boolean() && e.at("git_dirty").get<bool>();
    env.hostname = r.text(e, "hostname");
    s.environment = env;
    s.gpu_uuid = r.text(e, "gpu_uuid");
    s.gpu_clocks = r.text(e, "gpu_clocks");
    s.gpu_power_limit = r.text(e, "gpu_power_limit");
    s.threads = r.count(e, "threads", /*at_least_one=*/true);
  }
  return s;
}

RunSummary read_run_summary(const std::filesystem::path& path) {
  return parse_run_summary(read_file(path, "run summary"), path.string());
}

}  // namespace gpt::harness
