// Test-only stand-in for train_gpt: accepts its command line (ARCHITECTURE contract), prints speedrun log
// lines whose final val loss ~ N(mean, sd) and train time ~ N(time, time_sd), seeded by --seed, and
// writes OUT/ID.txt and OUT/ID.json. It can also crash, hang, print garbage, diverge (exit 3), fail
// (exit 1), stop early after a training line (`early`) or right after an intermediate validation (`cut`),
// so the harness's handling of each can be tested end to end.
//
// Every behaviour flag can also come from the environment (flag wins): SYNTH_MEAN, SYNTH_SD,
// SYNTH_TIME_MS, SYNTH_TIME_SD, SYNTH_STEPS, SYNTH_STEP_SLEEP_MS, SYNTH_MODE, SYNTH_MODE_SEEDS
// (comma-separated seeds the mode applies to; all seeds if unset), SYNTH_TRACK3 (print seconds),
// SYNTH_GIT_COMMIT (the commit its ID.json reports, default 0000000).
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string env_or(const char* name, std::string fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

bool seed_selected(const std::string& list, long long seed) {
  if (list.empty()) return true;
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (!item.empty() && std::stoll(item) == seed) return true;
  }
  return false;
}

struct Output {
  std::ofstream file;
  void line(const std::string& text) {
    std::cout << text << "\n" << std::flush;
    if (file) file << text << "\n" << std::flush;
  }
};

std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0, double e = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c, d, e);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"synthetic trainer (tests only): speaks the train_gpt command line and log format"};
  std::string recipe = "tiny", data, run_id = "synthetic", out = ".", backend = "cpu";
  long long seed = 0;
  int gpus = 1;
  std::vector<std::string> sets;
  double mean = std::stod(env_or("SYNTH_MEAN", "3.27"));
  double sd = std::stod(env_or("SYNTH_SD", "0.01"));
  double time_ms = std::stod(env_or("SYNTH_TIME_MS", "1000"));
  double time_sd = std::stod(env_or("SYNTH_TIME_SD", "20"));
  int steps = std::stoi(env_or("SYNTH_STEPS", "20"));
  int step_sleep_ms = std::stoi(env_or("SYNTH_STEP_SLEEP_MS", "0"));
  std::string mode = env_or("SYNTH_MODE", "ok");
  std::string mode_seeds = env_or("SYNTH_MODE_SEEDS", "");
  bool track3 = env_or("SYNTH_TRACK3", "0") == "1";
  std::string git_commit = env_or("SYNTH_GIT_COMMIT", "0000000");
  app.add_option("--recipe", recipe);
  app.add_option("--data", data);
  app.add_option("--seed", seed);
  app.add_option("--run-id", run_id);
  app.add_option("--out", out);
  app.add_option("--backend", backend);
  app.add_option("--gpus", gpus);
  app.add_option("--set", sets);
  app.add_option("--mean", mean);
  app.add_option("--sd", sd);
  app.add_option("--time-ms", time_ms);
  app.add_option("--time-sd", time_sd);
  app.add_option("--steps", steps)->check(CLI::PositiveNumber);
  app.add_option("--step-sleep-ms", step_sleep_ms);
  app.add_option("--mode", mode)
      ->check(CLI::IsMember({"ok", "crash", "hang", "garbage", "diverge", "fail", "early", "cut"}));
  app.add_option("--mode-seeds", mode_seeds);
  app.add_flag("--track3", track3);
  app.add_option("--git-commit", git_commit, "the commit ID.json reports (a build's own, in compare's tests)");
  std::string recipe_hash = "synthetic";
  app.add_option("--recipe-hash", recipe_hash, "the recipe hash ID.json reports (an arm's own, in compare's tests)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (!seed_selected(mode_seeds, seed)) mode = "ok";

  std::mt19937_64 rng(static_cast<unsigned long long>(seed) * 0x9E3779B97F4A7C15ull + 1);
  const double final_loss = std::normal_distribution<double>(mean, sd)(rng);
  const double total_ms = std::max(1.0, std::normal_distribution<double>(time_ms, time_sd)(rng));

  std::filesystem::create_directories(out);
  Output log;
  log.file.open(std::filesystem::path(out) / (run_id + ".txt"));
  log.line("synthetic trainer: recipe=" + recipe + " data=" + data + " seed=" + std::to_string(seed) +
           " run_id=" + run_id + " backend=" + backend + " gpus=" + std::to_string(gpus));
  log.line(std::string(100, '='));
  if (mode == "garbage") {
    log.line("\x01\x02 this is not a log \xff\xfe");
    log.line("step:?/? val_loss:soon");
    return 0;
  }

  const int val_every = std::max(1, steps / 4);
  const int stop_at = mode == "early" || mode == "cut" ? steps / 2 : steps;
  nlohmann::json history = nlohmann::json::array();
  double loss = 0, elapsed = 0;
  for (int s = 0; s <= stop_at; ++s) {
    elapsed = total_ms * s / steps;
    const std::string time = track3 ? fmt("train_time:%.3fs", elapsed / 1000.0) : fmt("train_time:%.0fms", elapsed);
    const std::string avg = fmt("step_avg:%.2fms", elapsed / std::max(s, 1));
    if (s == steps || s % val_every == 0) {
      // The last validation prints the summary's final loss: a summary and its log must agree (run_checks.h).
      loss = s == steps ? final_loss : final_loss + (10.8 - final_loss) * std::exp(-5.0 * s / steps);
      const bool nan_now = mode == "diverge" && s >= steps / 2;
      log.line(fmt("step:%.0f/%.0f ", s, steps) + (nan_now ? std::string("val_loss:nan") : fmt("val_loss:%.4f", loss)) +
               " " + time + " " + avg);
      if (nan_now) {
        nlohmann::json summary = {{"schema_version", 1},  {"run_id", run_id},          {"seed", seed},
                                  {"status", "diverged"}, {"final_val_loss", nullptr}, {"steps", s},
                                  {"total_steps", steps}};
        std::ofstream(std::filesystem::path(out) / (run_id + ".json")) << summary.dump(2);
        return 3;
      }
      history.push_back(
          {{"step", s}, {"val_loss", std::round(loss * 1e4) / 1e4}, {"train_time_ms", std::round(elapsed)}});
    } else {
      log.line(fmt("step:%.0f/%.0f ", s, steps) + time + " " + avg);
    }
    if (mode == "cut" && s == stop_at && s % val_every == 0) return 0;  // cut just after a validation
    if (mode == "crash" && s == steps / 2) std::abort();
    if (mode == "fail" && s == steps / 2) {
      log.line("RuntimeError: synthetic failure at step " + std::to_string(s));
      return 1;
    }
    if (mode == "hang" && s == steps / 2) {
      while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    if (step_sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_sleep_ms));
  }
  if (mode == "early") return 0;  // stopped after a training line: no final validation
  log.line("peak memory allocated: 1234 MiB reserved: 2048 MiB");
  nlohmann::json summary = {{"schema_version", 1},
                            {"run_id", run_id},
                            {"seed", seed},
                            {"recipe", {{"name", recipe}, {"hash", recipe_hash}}},
                            {"status", "ok"},
                            {"final_val_loss", std::round(final_loss * 1e4) / 1e4},
                            {"train_time_ms", std::round(total_ms)},
                            {"steps", steps},
                            {"total_steps", steps},
                            {"tokens", static_cast<long long>(steps) * 1024},
                            {"val_history", history},
                            {"peak_memory_mib", 1234},
                            {"world_size", gpus},
                            {"backend", backend},
                            {"environment", {{"gpu", "synthetic"}, {"cpu", "synthetic"}, {"git_commit", git_commit}}}};
  std::ofstream(std::filesystem::path(out) / (run_id + ".json")) << summary.dump(2);
  return 0;
}
