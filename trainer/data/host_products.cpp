#include "trainer/data/host_products.h"

#include <algorithm>

#include "base/check.h"
#include "trainer/data/shard.h"

namespace gpt {

namespace {

// int32 multiply with two's-complement wrap-around (computed unsigned: signed overflow is undefined in C++).
std::int32_t wrapping_mul(std::int32_t a, std::int32_t b) {
  return static_cast<std::int32_t>(static_cast<std::uint32_t>(a) * static_cast<std::uint32_t>(b));
}

std::int32_t floor_mod(std::int32_t a, std::int32_t m) {
  const std::int32_t r = a % m;
  return r < 0 ? r + m : r;
}

}  // namespace

void bigram_row_ids(std::span<const std::int32_t> inputs, std::int32_t modulus, std::span<std::int32_t> out) {
  GPT_CHECK(modulus > 0, "bigram_row_ids: modulus M must be positive, got ", modulus);
  GPT_CHECK(out.size() == inputs.size(), "bigram_row_ids: output has ", out.size(), " entries, inputs ", inputs.size());
  if (inputs.empty()) return;
  out[0] = modulus;
  for (std::size_t t = 1; t < inputs.size(); ++t) {
    const std::int32_t prev = t == 1 ? modulus : inputs[t - 1];
    const std::int32_t mixed = wrapping_mul(36313, inputs[t]) ^ wrapping_mul(27191, prev);
    out[t] = floor_mod(mixed, modulus);
  }
}

std::vector<std::int32_t> bigram_row_ids(std::span<const std::int32_t> inputs, std::int32_t modulus) {
  std::vector<std::int32_t> out(inputs.size());
  bigram_row_ids(inputs, modulus, out);
  return out;
}

void bigram_sign_rows(std::span<const std::int32_t> inputs, std::span<std::int32_t> out) {
  GPT_CHECK(out.size() == inputs.size(), "bigram_sign_rows: output has ", out.size(), " entries, inputs ",
            inputs.size());
  if (inputs.empty()) return;
  out[0] = 0;
  for (std::size_t t = 1; t < inputs.size(); ++t) out[t] = floor_mod(inputs[t - 1] ^ inputs[t], kBigramSignRows);
}

std::vector<std::int32_t> bigram_sign_rows(std::span<const std::int32_t> inputs) {
  std::vector<std::int32_t> out(inputs.size());
  bigram_sign_rows(inputs, out);
  return out;
}

void ngram_row_ids(std::span<const std::int32_t> inputs, std::int64_t total_rows, std::span<std::int32_t> out) {
  GPT_CHECK(total_rows >= 4 && total_rows % 2 == 0 && total_rows <= INT32_MAX,
            "ngram_row_ids: table rows must be "
            "even, >= 4 and below 2^31, got ",
            total_rows);
  GPT_CHECK(out.size() == 2 * inputs.size(), "ngram_row_ids: output has ", out.size(),
            " entries, expected 2T = ", 2 * inputs.size());
  const auto half = static_cast<std::int32_t>(total_rows / 2);
  const std::int32_t m = half - 1;
  const std::size_t n = inputs.size();
  for (std::size_t t = 0; t < n; ++t) {
    if (t == 0) {
      out[t] = m;
    } else {
      const std::int32_t prev = t == 1 ? m : inputs[t - 1];
      out[t] = floor_mod(wrapping_mul(36313, inputs[t]) ^ wrapping_mul(27191, prev), m);
    }
    if (t < 2) {
      out[n + t] = half + m;
    } else {
      const std::int32_t mixed =
          wrapping_mul(17351, inputs[t]) ^ wrapping_mul(60961, inputs[t - 1]) ^ wrapping_mul(45259, inputs[t - 2]);
      out[n + t] = half + floor_mod(mixed, m);
    }
  }
}

std::vector<std::int32_t> ngram_row_ids(std::span<const std::int32_t> inputs, std::int64_t total_rows) {
  std::vector<std::int32_t> out(2 * inputs.size());
  ngram_row_ids(inputs, total_rows, out);
  return out;
}

void ngram_sign_rows(std::span<const std::int32_t> inputs, std::span<std::int32_t> out) {
  GPT_CHECK(out.size() == 2 * inputs.size(), "ngram_sign_rows: output has ", out.size(),
            " entries, expected 2T = ", 2 * inputs.size());
  constexpr std::int32_t mask = kBigramSignRows - 1;
  const std::size_t n = inputs.size();
  for (std::size_t t = 0; t < n; ++t) {
    out[t] = t >= 1 ? (wrapping_mul(30011, inputs[t - 1]) ^ wrapping_mul(48271, inputs[t])) & mask : 0;
    out[n + t] = t >= 2 ? (wrapping_mul(26801, inputs[t - 2]) ^ wrapping_mul(39779, inputs[t - 1]) ^
                           wrapping_mul(58699, inputs[t])) &
                              mask
                        : 0;
  }
}

std::vector<std::int32_t> ngram_sign_rows(std::span<const std::int32_t> inputs) {
  std::vector<std::int32_t> out(2 * inputs.size());
  ngram_sign_rows(inputs, out);
  return out;
}

std::int32_t default_cu_seqlens_rows(std::int64_t slice_tokens) {
  GPT_CHECK(slice_tokens > 0, "cu_seqlens rows: slice length T must be positive, got ", slice_tokens);
  if (slice_tokens == 16384) return 64;
  if (slice_tokens == 32768) return 96;
  if (slice_tokens == 49152) return 128;
  const std::int64_t blocks = (slice_tokens / 300 + 127) / 128;
  return static_cast<std::int32_t>(128 * std::max<std::int64_t>(blocks, 1));
}

std::vector<std::int32_t> training_cu_seqlens(std::span<const std::int64_t> piece_lengths, std::int32_t rows,
                                              std::int64_t segment_cap) {
  GPT_CHECK(!piece_lengths.empty(), "cu_seqlens: a slice needs at least one piece");
  GPT_CHECK(segment_cap >= 0, "cu_seqlens: segment cap must be >= 0, got ", segment_cap);
  std::int64_t total = 0;
  for (std::int64_t len : piece_lengths) {
    GPT_CHECK(len > 0, "cu_seqlens: piece lengths must be positive, got ", len);
    total += len;
  }
  const std::int64_t slice_tokens = total - 1;
  GPT_CHECK(slice_tokens > 0 && slice_tokens <= INT32_MAX, "cu_seqlens: slice length ", slice_tokens, " outside int32");
  std::vector<std::int32_t> table{0};
  std::int64_t start = 0;
  for (std::size_t i = 0; i < piece_lengths.size(); ++i) {
    const bool last = i + 1 == piece_lengths.size();
    const std::int64_t stop = start + piece_lengths[i] - (last ? 1 : 0);
    // Cap boundaries at start+cap, start+2cap, ... strictly inside the segment, then its end.
    if (segment_cap > 0) {
      for (std::int64_t b = start + segment_cap; b < stop; b += segment_cap)
        table.push_back(static_cast<std::int32_t>(b));
    }
    table.push_back(static_cast<std::int32_t>(stop));
    start = stop;
  }
  const std::size_t segments = table.size() - 1;
  GPT_CHECK(segments < static_cast<std::size_t>(rows), "cu_seqlens: ", segments, " segments do not fit a table of ",
            rows, " rows (need segments < R); raise R or lower T");
  table.resize(static_cast<std::size_t>(rows), static_cast<std::int32_t>(slice_tokens));
  return table;
}

std::vector<std::int32_t> validation_cu_seqlens(std::span<const std::int32_t> inputs, std::int32_t rows) {
  GPT_CHECK(!inputs.empty() && inputs.size() <= INT32_MAX, "validation cu_seqlens: window length ", inputs.size(),
            " outside [1, 2^31)");
  const auto window = static_cast<std::int32_t>(inputs.size());
  std::vector<std::int32_t> table{0};
  for (std::int32_t t = 0; t < window; ++t) {
    if (inputs[static_cast<std::size_t>(t)] == kBosToken) table.push_back(t);
  }
  table.push_back(window);
  const std::size_t segments = table.size() - 1;
  GPT_CHECK(segments < static_cast<std::size_t>(rows), "validation cu_seqlens: ", segments,
            " segments do not fit a table of ", rows, " rows (need segments < R); raise R");
  table.resize(static_cast<std::size_t>(rows), window);
  return table;
}

std::int32_t longest_segment(std::span<const std::int32_t> cu_seqlens) {
  std::int32_t longest = 0;
  for (std::size_t i = 1; i < cu_seqlens.size(); ++i) longest = std::max(longest, cu_seqlens[i] - cu_seqlens[i - 1]);
  return longest;
}

}  // namespace gpt
