#pragma once
// SHA-1 (FIPS 180-4), used only to split corpus documents into train/validation by name (docs/CORPUS.md):
// a stable, widely reproducible hash (Python: int(hashlib.sha1(name).hexdigest(), 16) % 50).
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gpt {

using Sha1Digest = std::array<std::uint8_t, 20>;

Sha1Digest sha1(std::string_view bytes);
std::string to_hex(const Sha1Digest& digest);
// The digest read as a big-endian unsigned integer, reduced modulo `m` (m > 0).
std::uint64_t digest_mod(const Sha1Digest& digest, std::uint64_t m);

}  // namespace gpt
