#pragma once
// FNV-1a 64 (Fowler-Noll-Vo), the one content hash of the project: recipe hashes, corpus fingerprints, checkpoint
// checksums, environment fingerprints and run-row checksums in the results database all use it, so its values
// must never change.
#include <cstdint>
#include <string>
#include <string_view>

namespace gpt {

inline constexpr std::uint64_t kFnv1a64OffsetBasis = 0xcbf29ce484222325ull;  // 14695981039346656037
inline constexpr std::uint64_t kFnv1a64Prime = 0x100000001b3ull;
// The recipe hash and the results database's run checksums and environment fingerprints start from the offset
// basis with its last decimal digit lost. Recipe hashes in stored runs and checksums in existing databases were
// made with it, so those hashes keep it; anything new starts from kFnv1a64OffsetBasis.
inline constexpr std::uint64_t kFnv1a64StoredHashBasis = 1469598103934665603ull;

// Folds `bytes` into `hash` (start from the offset basis; pass the result back in to hash a sequence of pieces).
constexpr std::uint64_t fnv1a64(std::string_view bytes, std::uint64_t hash = kFnv1a64OffsetBasis) {
  for (const char c : bytes) hash = (hash ^ static_cast<unsigned char>(c)) * kFnv1a64Prime;
  return hash;
}

// 16 lower-case hex digits, zero-padded: how hashes are stored and shown.
std::string hex64(std::uint64_t value);

// fnv1a64 of `bytes` (from `basis`) as 16 hex digits.
inline std::string fnv1a64_hex(std::string_view bytes, std::uint64_t basis = kFnv1a64OffsetBasis) {
  return hex64(fnv1a64(bytes, basis));
}

}  // namespace gpt
