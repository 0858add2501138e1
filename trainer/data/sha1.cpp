#include "trainer/data/sha1.h"

#include <bit>
#include <cstring>

#include "base/check.h"

namespace gpt {

namespace {

std::uint32_t load_be32(const std::uint8_t* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}

void compress_block(std::array<std::uint32_t, 5>& h, const std::uint8_t* block) {
  std::array<std::uint32_t, 80> w{};
  for (int t = 0; t < 16; ++t) w[static_cast<std::size_t>(t)] = load_be32(block + 4 * t);
  for (std::size_t t = 16; t < 80; ++t) w[t] = std::rotl(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1);
  std::uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (std::size_t t = 0; t < 80; ++t) {
    std::uint32_t f = 0, k = 0;
    if (t < 20) {
      f = (b & c) | (~b & d);
      k = 0x5A827999;
    } else if (t < 40) {
      f = b ^ c ^ d;
      k = 0x6ED9EBA1;
    } else if (t < 60) {
      f = (b & c) | (b & d) | (c & d);
      k = 0x8F1BBCDC;
    } else {
      f = b ^ c ^ d;
      k = 0xCA62C1D6;
    }
    const std::uint32_t temp = std::rotl(a, 5) + f + e + k + w[t];
    e = d;
    d = c;
    c = std::rotl(b, 30);
    b = a;
    a = temp;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
}

}  // namespace

Sha1Digest sha1(std::string_view bytes) {
  std::array<std::uint32_t, 5> h = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  std::size_t full = bytes.size() / 64;
  for (std::size_t i = 0; i < full; ++i) compress_block(h, data + 64 * i);
  // Padding: 0x80, zeros, then the message length in bits as a big-endian 64-bit integer.
  std::array<std::uint8_t, 128> tail{};
  const std::size_t rest = bytes.size() - 64 * full;
  if (rest > 0) std::memcpy(tail.data(), data + 64 * full, rest);
  tail[rest] = 0x80;
  const std::size_t tail_blocks = rest + 1 + 8 <= 64 ? 1 : 2;
  const std::uint64_t bits = static_cast<std::uint64_t>(bytes.size()) * 8;
  for (int i = 0; i < 8; ++i)
    tail[64 * tail_blocks - 1 - static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(bits >> (8 * i));
  for (std::size_t i = 0; i < tail_blocks; ++i) compress_block(h, tail.data() + 64 * i);
  Sha1Digest digest{};
  for (std::size_t i = 0; i < 5; ++i) {
    for (std::size_t j = 0; j < 4; ++j) digest[4 * i + j] = static_cast<std::uint8_t>(h[i] >> (24 - 8 * j));
  }
  return digest;
}

std::string to_hex(const Sha1Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::uint8_t byte : digest) {
    out += kHex[byte >> 4];
    out += kHex[byte & 15];
  }
  return out;
}

std::uint64_t digest_mod(const Sha1Digest& digest, std::uint64_t m) {
  GPT_CHECK(m > 0 && m < (std::uint64_t{1} << 48), "digest_mod: modulus must be in [1, 2^48), got ", m);
  std::uint64_t r = 0;
  for (std::uint8_t byte : digest) r = (r * 256 + byte) % m;
  return r;
}

}  // namespace gpt
