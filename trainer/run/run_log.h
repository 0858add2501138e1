#pragma once
// The run log (RECIPE §9.3, the trainer ↔ harness contract): OUT/ID.txt holds a header (recipe, git revision,
// environment) and then the speedrun step lines, each flushed as it is written so a killed run leaves a valid
// prefix. Only rank 0 writes; lines also go to stdout.
#include <cstdint>
#include <fstream>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gpt {

// The speedrun's line formats.
std::string validation_line(int64_t step, int64_t total_steps, double val_loss, double train_time_ms);
std::string training_line(int64_t step, int64_t total_steps, double train_time_ms);
std::string peak_memory_line(int64_t allocated_mib, int64_t reserved_mib);

// Where the run executes, for the log header and the summary's "environment".
// Where one rank of a run sits (recorded for every rank by rank 0).
struct RankPlace {
  int rank = 0;
  std::string host;
  std::string device;
};

struct RunEnvironment {
  std::string hostname;
  std::string cpu;
  int threads = 1;
  std::string backend;
  std::string compiler;  // name and version, "GCC 12.2.0"
  // The GPU of a CUDA run (describe_gpu in backend.h; all empty on the CPU): its name and UUID, the CUDA driver and
  // runtime versions (the NVIDIA driver's beside the first where NVML can be loaded), NCCL's version in a build
  // with NCCL, and its clocks and power limit where they can be read.
  std::string gpu, gpu_uuid, driver, cuda, nccl, gpu_clocks, gpu_power_limit;
  std::string build_type;
  std::string git_commit;
  bool git_dirty = false;
  int world_size = 1;
  std::vector<RankPlace> ranks;  // every rank's host and device, in rank order (empty: only this process)

  nlohmann::json to_json() const;
};
RunEnvironment describe_environment(const std::string& backend, int threads);

// Peak resident set size of this process in MiB. The CPU backend reports it as both "allocated" and
// "reserved" peak memory (there is no separate allocator pool to distinguish).
int64_t peak_rss_mib();

class RunLog {
 public:
  // `enabled` = rank 0. `append` continues an existing log (resume).
  RunLog(const std::filesystem::path& path, bool enabled, bool append, bool echo);
  // Writes one line (newline added), flushes the file, echoes to stdout. Throws gpt::Error naming the log file when
  // the write fails (disk full, I/O error): a run whose log is lost must not look finished.
  void line(const std::string& text);

 private:
  std::filesystem::path path_;
  std::ofstream file_;
  bool enabled_;
  bool echo_;
};

}  // namespace gpt
