#pragma once
// RECIPE §S.6 canonical mask: bit (p, x) is set when the GPT-2 tokenizer never emits token x directly after token p.
// The final validation sets the softcapped logits of masked columns to −60 (kernels/softcap_loss.h).
//
// Layout: V × V/8 bytes (V = 50304), row p = previous token, bit x of row p in byte x/8 at bit x mod 8
// (little-endian bit order); 316 MB.
//   Tier 0 (project definition): columns 50257..50303 (the padding ids) in every row.
//   Tier 1 (pair mask): built from the BPE merge history of every token (see build_canonical_mask).
// Regression values of tier 1 alone (no tier-0 columns): 70,889,701 set bits in 47,432 non-empty rows. With tier 0
// added every one of the V rows is non-empty and 47·V more bits are set (tier 1 never touches those columns).
//
// CanonicalMaskBuild runs the build on a background thread so that it overlaps training (§S.6 timing). Run loop:
//   clock start, rank 0 only:  std::optional<CanonicalMaskBuild> build; build.emplace(tokenizer);
//   before the final validation, every rank (on the clock):
//     extensions.set_canonical_mask(broadcast_canonical_mask(build ? &*build : nullptr, comm, Device::cpu));
//   (the model's ModelExtensions::set_canonical_mask copies it to the model's device), then the validation passes
//   as usual.
#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <vector>

#include "kernels/tensor.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace gpt {

inline constexpr int64_t kCanonicalMaskVocab = 50304;
inline constexpr int64_t kCanonicalMaskRowBytes = kCanonicalMaskVocab / 8;

class CanonicalMask {
 public:
  CanonicalMask();  // all bits clear

  bool test(int64_t previous, int64_t next) const { return (bits_[index(previous, next)] >> (next & 7)) & 1u; }
  void set(int64_t previous, int64_t next) { bits_[index(previous, next)] |= static_cast<uint8_t>(1u << (next & 7)); }
  std::span<const uint8_t> row(int64_t previous) const {
    return {bits_.data() + previous * kCanonicalMaskRowBytes, static_cast<size_t>(kCanonicalMaskRowBytes)};
  }
  std::span<const uint8_t> bytes() const { return bits_; }

  int64_t count_set_bits() const;
  int64_t count_nonempty_rows() const;
  // u8 [V, V/8] on `device` (a copy), the form the masked validation loss takes.
  Tensor to_tensor(Device device = Device::cpu) const;

 private:
  static size_t index(int64_t previous, int64_t next) {
    return static_cast<size_t>(previous * kCanonicalMaskRowBytes + (next >> 3));
  }
  std::vector<uint8_t> bits_;
};

struct CanonicalMaskOptions {
  bool tier0 = true;  // padding columns 50257..50303
  bool tier1 = true;  // pair mask
};

// The recipe's extensions.canonical_mask setting: "off" → nullopt (no build), "tier0" → padding columns only, "tier1" →
// tier 0 plus the pair mask (the seed default). Anything else throws naming the key and the accepted values.
std::optional<CanonicalMaskOptions> canonical_mask_options(std::string_view setting);

// Builds the mask from the tokenizer's 50,256 mergeable byte strings and ranks. `cancel` (optional) is polled
// between merge rules; when it becomes true the build throws gpt::Error("canonical mask build cancelled").
CanonicalMask build_canonical_mask(const Gpt2Tokenizer& tok, const CanonicalMaskOptions& options = {},
                                   const std::atomic<bool>* cancel = nullptr);

// Background build (RAII: the destructor cancels a running build and joins the thread).
class CanonicalMaskBuild {
 public:
  // Copies the tokenizer (the build must not depend on the caller's lifetime) and starts the thread at once.
  explicit CanonicalMaskBuild(const Gpt2Tokenizer& tok, CanonicalMaskOptions options = {});
  ~CanonicalMaskBuild();
  CanonicalMaskBuild(const CanonicalMaskBuild&) = delete;
  CanonicalMaskBuild& operator=(const CanonicalMaskBuild&) = delete;

  // Blocks until the build has finished; rethrows its error, if any. May be called more than once.
  const CanonicalMask& wait();
  bool done() const { return done_.load(std::memory_order_acquire); }
  // Wall seconds the build itself took (valid after wait()).
  double build_seconds() const { return build_seconds_; }

 private:
  Gpt2Tokenizer tok_;
  CanonicalMaskOptions options_;
  std::optional<CanonicalMask> mask_;  // set by the thread (316 MB allocated there, not by the caller)
  std::exception_ptr error_;
  double build_seconds_ = 0.0;
  std::atomic<bool> cancel_{false};
  std::atomic<bool> done_{false};
  std::thread thread_;  // last member: started after everything it uses exists
};

class Comm;

// §S.6 before the final validation, called by every rank of `comm`: rank 0 waits for `build` (required there,
// ignored elsewhere) and its mask is broadcast from rank 0; returns u8 [V, V/8] on `device` on every rank.
Tensor broadcast_canonical_mask(CanonicalMaskBuild* build, Comm& comm, Device device = Device::cpu);

namespace canonical_mask_detail {

// Edge classes of §S.6 step 2.
enum class EdgeClass : uint8_t { space, number, letter, other, undecodable };
char edge_class_letter(EdgeClass c);  // 'S', 'N', 'L', 'O', '?'
// Class of the first character of the shortest 1–4 byte prefix of `bytes` that is valid UTF-8 ('?' if none).
EdgeClass start_class(std::string_view bytes);
// Class of the last character of the shortest 1–4 byte suffix that is valid UTF-8 ('?' if none).
EdgeClass end_class(std::string_view bytes);
// Class of one code point: S = Python's str.isspace set without U+001C..U+001F (= the White_Space property),
// N = category N*, L = category L*, O otherwise.
EdgeClass code_point_class(char32_t cp);
// §S.6 step 3: valid UTF-8 ending in 's 't 're 've 'm 'll 'd, preceded by nothing or a letter/number character.
bool is_closed(std::string_view bytes);

// One entry of a piece trajectory: from merge time `start` on (until the next entry) the piece is token `piece`.
struct TrajectoryEntry {
  int32_t start;
  int32_t piece;
};
// §S.6 step 1: BPE replay of one token's bytes alone.
struct TokenReplay {
  int32_t final_left = -1;             // a_t of the final merge (−1 for a single byte)
  int32_t final_right = -1;            // c_t
  std::vector<TrajectoryEntry> first;  // first-piece trajectory, starts ascending
  std::vector<TrajectoryEntry> last;   // last-piece trajectory
};
// Throws when the token does not re-encode to itself (tier 0's premise).
TokenReplay replay_token(const Gpt2Tokenizer& tok, int32_t token);

}  // namespace canonical_mask_detail
}  // namespace gpt
