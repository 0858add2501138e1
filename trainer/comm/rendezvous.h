#pragma once
// File rendezvous of the processes of one run: rank 0 publishes a small blob
// (the NCCL unique id) as a file in a directory every rank can see, the other
// ranks wait for it. The directory must be fresh for each run (the local
// launcher makes one under $TMPDIR and removes it afterwards; under Slurm or
// torchrun point SPEEDRUN_RENDEZVOUS_DIR at a new directory on a file system
// all nodes share).
//
// File format: one header line "speedrun-rendezvous v1 world=<W> bytes=<N>\n",
// then the N blob bytes. Rank 0 writes a temporary file and renames it into
// place, so a reader sees either no file or the whole of it.
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace gpt {

inline constexpr const char* kRendezvousDirVar = "SPEEDRUN_RENDEZVOUS_DIR";
inline constexpr const char* kRendezvousTimeoutVar = "SPEEDRUN_RENDEZVOUS_TIMEOUT_S";

struct RendezvousOptions {
  std::filesystem::path dir;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};  // NCCL start-up on 8 GPUs takes seconds
  std::chrono::milliseconds poll{20};
};

// Rank 0: writes `name` into the directory (created if missing). Throws when
// the file exists already (a stale directory from an earlier run would hand
// other ranks the wrong id) or cannot be written.
void publish_blob(const RendezvousOptions& options, const std::string& name, std::span<const std::byte> blob,
                  int world_size);

// Other ranks: polls for `name` until the timeout, then checks that the header
// names the same world size and exactly `bytes` bytes follow. Throws with the
// path, the elapsed time and what was expected.
std::vector<std::byte> wait_for_blob(const RendezvousOptions& options, const std::string& name, size_t bytes,
                                     int world_size);

// SPEEDRUN_RENDEZVOUS_DIR (required) and SPEEDRUN_RENDEZVOUS_TIMEOUT_S
// (optional, seconds > 0) through `getenv`.
RendezvousOptions rendezvous_from_env(const std::function<std::optional<std::string>(const std::string&)>& getenv);

}  // namespace gpt
