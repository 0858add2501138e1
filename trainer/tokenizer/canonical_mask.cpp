#include "trainer/tokenizer/canonical_mask.h"

#include <array>
#include <bit>
#include <chrono>
#include <cstring>
#include <limits>

#include "base/check.h"
#include "trainer/comm/comm.h"
#include "trainer/tokenizer/unicode_class.h"

namespace gpt {

using canonical_mask_detail::EdgeClass;

CanonicalMask::CanonicalMask() : bits_(static_cast<size_t>(kCanonicalMaskVocab * kCanonicalMaskRowBytes), 0) {}

int64_t CanonicalMask::count_set_bits() const {
  static_assert(kCanonicalMaskRowBytes % 8 == 0);
  int64_t count = 0;
  for (size_t i = 0; i < bits_.size(); i += 8) {
    uint64_t word;
    std::memcpy(&word, bits_.data() + i, 8);
    count += std::popcount(word);
  }
  return count;
}

int64_t CanonicalMask::count_nonempty_rows() const {
  int64_t count = 0;
  for (int64_t p = 0; p < kCanonicalMaskVocab; ++p) {
    const auto r = row(p);
    for (const uint8_t byte : r) {
      if (byte != 0) {
        ++count;
        break;
      }
    }
  }
  return count;
}

Tensor CanonicalMask::to_tensor(Device device) const {
  Tensor host = Tensor::empty({kCanonicalMaskVocab, kCanonicalMaskRowBytes}, DType::u8);
  std::memcpy(host.raw(), bits_.data(), bits_.size());
  return device == Device::cpu ? host : host.to(device);
}

namespace canonical_mask_detail {
namespace {

// Python's bytes.decode("utf-8") in strict mode accepts exactly the well-formed sequences of Unicode Table 3-7,
// which is what next_utf8_char decodes.
bool is_valid_utf8(std::string_view bytes) {
  for (size_t pos = 0; pos < bytes.size();) {
    const Utf8Char c = next_utf8_char(bytes, pos);
    if (c.code_point == kInvalidUtf8) return false;
    pos += c.length;
  }
  return true;
}

char32_t last_code_point(std::string_view valid_utf8) {
  char32_t last = 0;
  for (size_t pos = 0; pos < valid_utf8.size();) {
    const Utf8Char c = next_utf8_char(valid_utf8, pos);
    last = c.code_point;
    pos += c.length;
  }
  return last;
}

constexpr int32_t kForever = std::numeric_limits<int32_t>::max();

}  // namespace

char edge_class_letter(EdgeClass c) {
  switch (c) {
    case EdgeClass::space:
      return 'S';
    case EdgeClass::number:
      return 'N';
    case EdgeClass::letter:
      return 'L';
    case EdgeClass::other:
      return 'O';
    case EdgeClass::undecodable:
      return '?';
  }
  return '?';
}

EdgeClass code_point_class(char32_t cp) {
  // The pre-tokenizer's space class is the White_Space property, which equals Python's str.isspace set (category
  // Zs or bidirectional class WS, B, S) minus U+001C..U+001F: exactly the S class of §S.6 (checked by a test over
  // every code point).
  switch (char_class(cp)) {
    case CharClass::kSpace:
      return EdgeClass::space;
    case CharClass::kNumber:
      return EdgeClass::number;
    case CharClass::kLetter:
      return EdgeClass::letter;
    case CharClass::kOther:
      return EdgeClass::other;
  }
  return EdgeClass::other;
}

EdgeClass start_class(std::string_view bytes) {
  for (size_t k = 1; k <= std::min<size_t>(4, bytes.size()); ++k) {
    const std::string_view prefix = bytes.substr(0, k);
    if (is_valid_utf8(prefix)) return code_point_class(next_utf8_char(prefix, 0).code_point);
  }
  return EdgeClass::undecodable;
}

EdgeClass end_class(std::string_view bytes) {
  for (size_t k = 1; k <= std::min<size_t>(4, bytes.size()); ++k) {
    const std::string_view suffix = bytes.substr(bytes.size() - k);
    if (is_valid_utf8(suffix)) return code_point_class(last_code_point(suffix));
  }
  return EdgeClass::undecodable;
}

bool is_closed(std::string_view bytes) {
  static constexpr std::array<std::string_view, 7> kContractions = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  if (!is_valid_utf8(bytes)) return false;
  for (const std::string_view suffix : kContractions) {
    if (!bytes.ends_with(suffix)) continue;
    const std::string_view before = bytes.substr(0, bytes.size() - suffix.size());
    if (before.empty()) return true;
    const EdgeClass c = code_point_class(last_code_point(before));  // `before` is valid: the suffix is ASCII
    if (c == EdgeClass::letter || c == EdgeClass::number) return true;
  }
  return false;
}

TokenReplay replay_token(const Gpt2Tokenizer& tok, int32_t token) {
  const std::string_view bytes = tok.token_bytes(token);
  struct Part {
    size_t begin, end;
    int32_t id;
  };
  std::vector<Part> parts;
  parts.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    const std::optional<int32_t> id = tok.find_token(bytes.substr(i, 1));
    GPT_CHECK(id.has_value(), "canonical mask: byte ", static_cast<int>(static_cast<unsigned char>(bytes[i])),
              " of token ", token, " has no rank");
    parts.push_back({i, i + 1, *id});
  }
  TokenReplay replay;
  replay.first.push_back({0, parts.front().id});
  replay.last.push_back({0, parts.back().id});
  while (parts.size() > 1) {
    int32_t best = kForever;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {  // lowest rank, leftmost on ties (strict <)
      const std::optional<int32_t> rank =
          tok.find_token(bytes.substr(parts[i].begin, parts[i + 1].end - parts[i].begin));
      if (rank.has_value() && *rank < best) {
        best = *rank;
        at = i;
      }
    }
    if (best == kForever) break;
    replay.final_left = parts[at].id;
    replay.final_right = parts[at + 1].id;
    parts[at] = {parts[at].begin, parts[at + 1].end, best};  // a merged piece's id is the rank of its merge
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    if (at == 0) replay.first.push_back({best + 1, best});
    if (at + 1 == parts.size()) replay.last.push_back({best, best});
  }
  GPT_CHECK(parts.size() == 1 && parts.front().id == token, "canonical mask: token ", token,
            " does not re-encode to itself (", parts.size(), " pieces); the tokenizer data is not GPT-2's");
  return replay;
}

}  // namespace canonical_mask_detail

namespace {

using canonical_mask_detail::TokenReplay;

void add_tier0(CanonicalMask& mask) {
  for (int64_t p = 0; p < kCanonicalMaskVocab; ++p) {
    for (int64_t x = Gpt2Tokenizer::kEndOfText + 1; x < kCanonicalMaskVocab; ++x) mask.set(p, x);
  }
}

// A piece held by a token from merge time `start` up to (excluding) `end`.
struct Interval {
  int32_t token;
  int32_t start;
  int32_t end;
};

constexpr int kClasses = 5;  // EdgeClass values

void add_tier1(const Gpt2Tokenizer& tok, CanonicalMask& mask, const std::atomic<bool>* cancel) {
  using namespace canonical_mask_detail;
  constexpr int32_t n = Gpt2Tokenizer::kMergeableTokens;
  std::vector<TokenReplay> replays(n);
  std::vector<EdgeClass> end_classes(n);
  // last_by_piece[a]: non-closed tokens whose last piece is a during an interval;
  // first_by_piece[c][k]: tokens of start class k whose first piece is c during an interval ('?' left out).
  std::vector<std::vector<Interval>> last_by_piece(n);
  std::vector<std::array<std::vector<Interval>, kClasses>> first_by_piece(n);
  const auto check_cancel = [cancel] {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) GPT_FAIL("canonical mask build cancelled");
  };
  for (int32_t t = 0; t < n; ++t) {
    if (t % 1024 == 0) check_cancel();
    const std::string_view bytes = tok.token_bytes(t);
    GPT_CHECK((t < 256) == (bytes.size() == 1),
              "canonical mask: expected the 256 single bytes at ranks 0..255, "
              "token ",
              t, " has ", bytes.size(), " bytes");
    replays[t] = replay_token(tok, t);
    end_classes[t] = end_class(bytes);
    const auto add = [t](const std::vector<TrajectoryEntry>& trajectory, auto&& target_of) {
      for (size_t i = 0; i < trajectory.size(); ++i) {
        const int32_t end = i + 1 < trajectory.size() ? trajectory[i + 1].start : std::numeric_limits<int32_t>::max();
        target_of(trajectory[i].piece).push_back({t, trajectory[i].start, end});
      }
    };
    if (!is_closed(bytes))
      add(
          replays[t].last, [&](int32_t piece) -> auto& { return last_by_piece[piece]; });
    const EdgeClass start = start_class(bytes);
    if (start != EdgeClass::undecodable) {
      add(
          replays[t].first, [&](int32_t piece) -> auto& { return first_by_piece[piece][static_cast<int>(start)]; });
    }
  }
  // Start classes of x allowed after an end class of p: (S, S) and (O, L) are pre-tokenizer boundaries.
  const auto allowed = [](EdgeClass p_end, EdgeClass x_start) {
    return !(p_end == EdgeClass::space && x_start == EdgeClass::space) &&
           !(p_end == EdgeClass::other && x_start == EdgeClass::letter);
  };
  std::vector<int32_t> previous;
  std::array<std::vector<int32_t>, kClasses> next;
  for (int32_t rho = 256; rho < n; ++rho) {
    check_cancel();
    const TokenReplay& rule = replays[rho];
    const auto live = [rho](const Interval& iv) { return iv.start <= rho && rho < iv.end; };
    previous.clear();
    for (const Interval& iv : last_by_piece[rule.final_left]) {
      if (live(iv)) previous.push_back(iv.token);
    }
    if (previous.empty()) continue;
    bool any_next = false;
    for (int k = 0; k < kClasses; ++k) {
      next[k].clear();
      for (const Interval& iv : first_by_piece[rule.final_right][k]) {
        if (live(iv)) next[k].push_back(iv.token);
      }
      any_next = any_next || !next[k].empty();
    }
    if (!any_next) continue;
    for (const int32_t p : previous) {
      for (int k = 0; k < kClasses; ++k) {
        if (!allowed(end_classes[p], static_cast<EdgeClass>(k))) continue;
        for (const int32_t x : next[k]) mask.set(p, x);
      }
    }
  }
}

}  // namespace

std::optional<CanonicalMaskOptions> canonical_mask_options(std::string_view setting) {
  if (setting == "off") return std::nullopt;
  if (setting == "tier0") return CanonicalMaskOptions{.tier0 = true, .tier1 = false};
  if (setting == "tier1") return CanonicalMaskOptions{.tier0 = true, .tier1 = true};
  GPT_FAIL("extensions.canonical_mask must be off, tier0 or tier1, got '", setting, "'");
}

CanonicalMask build_canonical_mask(const Gpt2Tokenizer& tok, const CanonicalMaskOptions& options,
                                   const std::atomic<bool>* cancel) {
  const auto check_cancel = [cancel] {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) GPT_FAIL("canonical mask build cancelled");
  };
  check_cancel();
  CanonicalMask mask;
  if (options.tier0) add_tier0(mask);
  check_cancel();
  if (options.tier1) add_tier1(tok, mask, cancel);
  return mask;
}

CanonicalMaskBuild::CanonicalMaskBuild(const Gpt2Tokenizer& tok, CanonicalMaskOptions options)
    : tok_(tok), options_(options) {
  thread_ = std::thread([this] {
    try {
      const auto begin = std::chrono::steady_clock::now();
      mask_ = build_canonical_mask(tok_, options_, &cancel_);
      build_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    } catch (...) {
      error_ = std::current_exception();
    }
    done_.store(true, std::memory_order_release);
  });
}

CanonicalMaskBuild::~CanonicalMaskBuild() {
  cancel_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

const CanonicalMask& CanonicalMaskBuild::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
  return *mask_;
}

Tensor broadcast_canonical_mask(CanonicalMaskBuild* build, Comm& comm, Device device) {
  Tensor mask;
  if (comm.rank() == 0) {
    GPT_CHECK(build != nullptr, "broadcast_canonical_mask: rank 0 needs the canonical-mask build it started");
    mask = build->wait().to_tensor(device);
  } else {
    mask = Tensor::empty({kCanonicalMaskVocab, kCanonicalMaskRowBytes}, DType::u8, device);
  }
  if (comm.world_size() > 1) comm.broadcast(mask, 0);
  return mask;
}

}  // namespace gpt
