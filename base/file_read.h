#pragma once
// Reading a whole file into memory, once for every layer (recipes, checkpoints, logs, spool files, reports).
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace gpt {

// The file's bytes, unchanged (binary-safe); std::nullopt when it cannot be opened or a read fails. For callers
// that phrase their own error (or treat a missing file as "nothing yet").
std::optional<std::string> try_read_file(const std::filesystem::path& path);

// The file's bytes; throws gpt::Error "cannot read <what> '<path>' (<reason>)" when it cannot be opened or read.
std::string read_file(const std::filesystem::path& path, std::string_view what = "file");

}  // namespace gpt
