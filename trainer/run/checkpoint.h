#pragma once
// Checkpoint files: the whole training state in one file (issue item 7). Layout, little-endian:
//   "GPTCKPT\0" (8 bytes) | u32 format version (1) | u64 metadata length | metadata (JSON text)
//   | u64 tensor count | per tensor: u32 name length, name, u8 dtype, u8 ndim, i64 dims[ndim], u64 byte count,
//     bytes | u64 FNV-1a 64 of every preceding byte.
// Written to a temporary file beside the target and renamed, so a crash never leaves a partial checkpoint.
// Reading validates magic, version, structure and checksum and names the file and the defect.
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/step/trainable_model.h"

namespace gpt {

inline constexpr uint32_t kCheckpointVersion = 1;

struct CheckpointData {
  nlohmann::json meta;
  std::vector<NamedTensor> tensors;  // host tensors
};

void write_checkpoint(const std::filesystem::path& path, const nlohmann::json& meta,
                      const std::vector<NamedTensor>& tensors);
CheckpointData read_checkpoint(const std::filesystem::path& path);

// Writes `text` to `path` through a temporary file and a rename (used for checkpoints and run summaries).
void write_file_atomically(const std::filesystem::path& path, const std::string& text);

}  // namespace gpt
