#pragma once
// Host-side index products fed to the model with every microbatch (RECIPE §1.4, §2.5.2, §6):
// cu_seqlens tables, bigram row ids and bigram sign rows.
#include <cstdint>
#include <span>
#include <vector>

namespace gpt {

// Rows of the bigram sign table (σ_t = (x_{t-1} XOR x_t) mod 8192).
inline constexpr std::int32_t kBigramSignRows = 8192;
// Bigram table rows of the head recipe (M = rows - 1 = 377279) and of `tiny` (M = 50303).
inline constexpr std::int32_t kHeadBigramRows = 377280;
inline constexpr std::int32_t kTinyBigramRows = 50304;

// §2.5.2 over one microbatch's inputs: h_0 = M; for t >= 1, h_t = ((36313·x_t) XOR (27191·p_t)) mod M in int32
// two's-complement arithmetic with floor modulo, where p_1 = M (the reference's quirk) and p_t = x_{t-1} for t >= 2.
// `modulus` is M = bigram rows - 1 and must be positive; `out` has the size of `inputs`.
void bigram_row_ids(std::span<const std::int32_t> inputs, std::int32_t modulus, std::span<std::int32_t> out);
std::vector<std::int32_t> bigram_row_ids(std::span<const std::int32_t> inputs, std::int32_t modulus);

// §2.5.2 sign rows: σ_0 = 0, σ_t = (x_{t-1} XOR x_t) mod 8192.
void bigram_sign_rows(std::span<const std::int32_t> inputs, std::span<std::int32_t> out);
std::vector<std::int32_t> bigram_sign_rows(std::span<const std::int32_t> inputs);

// §S.2 hashed n-gram row ids over one microbatch's inputs, for a table of `total_rows` rows (even; half = rows/2,
// m = half - 1). `out` holds 2T ids: bigram ids then trigram ids. Bigram: b_0 = m, b_t = ((36313·x_t) XOR
// (27191·p_t)) mod m with p_1 = m (the §2.5.2 quirk) and p_t = x_{t-1} for t >= 2. Trigram: c_0 = c_1 = half + m,
// c_t = half + (((17351·x_t) XOR (60961·x_{t-1}) XOR (45259·x_{t-2})) mod m) for t >= 2. Products wrap in int32;
// floor modulo.
void ngram_row_ids(std::span<const std::int32_t> inputs, std::int64_t total_rows, std::span<std::int32_t> out);
std::vector<std::int32_t> ngram_row_ids(std::span<const std::int32_t> inputs, std::int64_t total_rows);

// §S.2 sign-pool rows (2T: bigram channel then trigram channel), pool of kBigramSignRows rows:
// sb_t = ((30011·x_{t-1}) XOR (48271·x_t)) AND 8191 for t >= 1, else 0;
// st_t = ((26801·x_{t-2}) XOR (39779·x_{t-1}) XOR (58699·x_t)) AND 8191 for t >= 2, else 0.
void ngram_sign_rows(std::span<const std::int32_t> inputs, std::span<std::int32_t> out);
std::vector<std::int32_t> ngram_sign_rows(std::span<const std::int32_t> inputs);

// §1.4 table length R for a slice of T tokens: 64, 96, 128 for T = 16384, 32768, 49152, otherwise
// 128·⌈⌊T/300⌋/128⌉. [project definition] never less than 128, so short test slices (T < 38400) get 128 rows.
std::int32_t default_cu_seqlens_rows(std::int64_t slice_tokens);

// §1.4 cu_seqlens of one training slice. `piece_lengths` are the slice's pieces (they sum to T + 1); segment
// lengths are the pieces with the last one shortened by 1. With `segment_cap` > 0 (§S.1) every segment longer
// than the cap gets extra boundaries every `segment_cap` tokens. Result: [0, c_1, ..., c_n, T, ..., T] of
// `rows` entries. Throws when the n segments do not fit (n >= rows).
std::vector<std::int32_t> training_cu_seqlens(std::span<const std::int64_t> piece_lengths, std::int32_t rows,
                                              std::int64_t segment_cap = 0);

// §6 cu_seqlens of a validation window: 0, then every t with inputs[t] == BOS (t = 0 gives an empty first
// segment), then Tv = inputs.size(), padded with Tv to `rows` entries. Throws when they do not fit.
std::vector<std::int32_t> validation_cu_seqlens(std::span<const std::int32_t> inputs, std::int32_t rows);

// Longest segment of a cu_seqlens table (the attention `max_seqlen` actually needed).
std::int32_t longest_segment(std::span<const std::int32_t> cu_seqlens);

}  // namespace gpt
