// The run's options outside the recipe: the hidden `debug.*` switches, run statuses and their exit codes, and
// the per-rank checkpoint file names (declared in training_run.h).
#include <string>
#include <vector>

#include "base/check.h"
#include "trainer/run/training_run.h"

namespace gpt {

void take_debug_switches(RunOptions& options) {
  std::vector<std::string> rest;
  for (const std::string& item : options.overrides) {
    if (item.rfind("debug.", 0) != 0) {
      rest.push_back(item);
      continue;
    }
    const auto eq = item.find('=');
    GPT_CHECK(eq != std::string::npos, "--set ", item, ": expected debug.KEY=VALUE");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "debug.inject_nan_step") {
      try {
        size_t used = 0;
        options.inject_nan_step = std::stoll(value, &used);
        GPT_CHECK(used == value.size() && options.inject_nan_step >= 0, "");
      } catch (const std::exception&) {
        GPT_FAIL("--set ", item, ": debug.inject_nan_step expects a step number >= 0");
      }
    } else if (key == "debug.stop_after_step") {
      try {
        size_t used = 0;
        options.stop_after_step = std::stoll(value, &used);
        GPT_CHECK(used == value.size() && options.stop_after_step >= 1, "");
      } catch (const std::exception&) {
        GPT_FAIL("--set ", item, ": debug.stop_after_step expects a step number >= 1");
      }
    } else if (key == "debug.final_checkpoint") {
      GPT_CHECK(value == "true" || value == "false", "--set ", item, ": debug.final_checkpoint expects true or false");
      options.final_checkpoint = value == "true";
    } else if (key == "debug.fault") {
      const size_t c1 = value.find(':'), c2 = c1 == std::string::npos ? c1 : value.find(':', c1 + 1);
      try {
        GPT_CHECK(c2 != std::string::npos, "");
        options.fault_kind = value.substr(0, c1);
        size_t used1 = 0, used2 = 0;
        const std::string rank = value.substr(c1 + 1, c2 - c1 - 1), step = value.substr(c2 + 1);
        options.fault_rank = std::stoi(rank, &used1);
        options.fault_step = std::stoll(step, &used2);
        GPT_CHECK(used1 == rank.size() && used2 == step.size() && options.fault_rank >= 0 && options.fault_step >= 0,
                  "");
        GPT_CHECK(options.fault_kind == "nan" || options.fault_kind == "error" || options.fault_kind == "kill", "");
      } catch (const std::exception&) {
        GPT_FAIL("--set ", item, ": debug.fault expects KIND:RANK:STEP with KIND nan, error or kill");
      }
    } else if (key == "debug.dump_batches") {
      GPT_CHECK(!value.empty(), "--set ", item, ": debug.dump_batches expects a folder");
      options.dump_batches = value;
    } else {
      GPT_FAIL("--set ", item, ": unknown debug switch '", key,
               "' (known: debug.inject_nan_step, debug.stop_after_step, debug.final_checkpoint, "
               "debug.fault, debug.dump_batches)");
    }
  }
  options.overrides = std::move(rest);
}

std::filesystem::path rank_checkpoint_path(const std::filesystem::path& rank0_path, int rank) {
  if (rank == 0) return rank0_path;
  std::filesystem::path p = rank0_path;
  p.replace_extension(".rank" + std::to_string(rank) + rank0_path.extension().string());
  return p;
}

const char* status_name(RunStatus status) {
  switch (status) {
    case RunStatus::finished:
      return "finished";
    case RunStatus::diverged:
      return "diverged";
    case RunStatus::failed:
      return "failed";
  }
  return "failed";
}

int exit_code(RunStatus status) {
  switch (status) {
    case RunStatus::finished:
      return 0;
    case RunStatus::diverged:
      return 3;
    case RunStatus::failed:
      return 1;
  }
  return 1;
}

}  // namespace gpt
