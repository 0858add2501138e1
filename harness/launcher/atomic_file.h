#pragma once
// Files that other harness processes may read at any moment (spool files, Slurm job files) are written to a
// temporary name and renamed into place: a reader sees the old or the new content, never half a file.
#include <filesystem>
#include <string_view>

namespace gpt::harness {

// Writes `text` to `path` through `path`.tmp and a rename; throws naming the file when a write fails.
void write_text_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace gpt::harness
