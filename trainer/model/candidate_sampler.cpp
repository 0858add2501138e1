#include "trainer/model/candidate_sampler.h"

#include <algorithm>
#include <numeric>

#include "base/check.h"

namespace gpt {

int64_t sweep_entry(int64_t index, int64_t vocab) {
  const int64_t k = ((index % vocab) + vocab) % vocab;
  return (kSweepMultiplier * k) % vocab;  // < 20011·50304: no overflow for any realistic V
}

CandidateSampler::CandidateSampler(int64_t vocab, int slices) : vocab_(vocab) {
  GPT_CHECK(vocab >= 1, "CandidateSampler: vocabulary size must be >= 1, got ", vocab);
  GPT_CHECK(std::gcd(kSweepMultiplier, vocab) == 1, "CandidateSampler: vocabulary size ", vocab,
            " shares a factor with the sweep multiplier ", kSweepMultiplier, ", so the sweep is no permutation");
  GPT_CHECK(slices >= 1, "CandidateSampler: slices per loader call must be >= 1, got ", slices);
  offsets_ = Tensor::zeros({slices}, DType::i64);
  reset();
}

void CandidateSampler::reset() {
  int64_t* o = offsets_.data<int64_t>();
  for (int64_t k = 0; k < offsets_.size(0); ++k) o[k] = (vocab_ * k / kSweepOffsetParts) % vocab_;
}

int64_t CandidateSampler::offset(int slice) const {
  GPT_CHECK(slice >= 0 && slice < slices(), "CandidateSampler: slice index ", slice, " outside [0, ", slices(), ")");
  return offsets_.data<int64_t>()[slice];
}

std::vector<int64_t> CandidateSampler::build(std::span<const int64_t> targets, int64_t size, int slice) {
  GPT_CHECK(slice >= 0 && slice < slices(), "sampled softmax: slice index ", slice, " outside [0, ", slices(), ")");
  GPT_CHECK(size >= 1 && size <= vocab_, "sampled softmax: P = ", size, " must lie in [1, V = ", vocab_, "]");
  std::vector<char> in_c(static_cast<size_t>(vocab_), 0);
  int64_t distinct = 0;
  for (size_t t = 0; t < targets.size(); ++t) {
    const int64_t y = targets[t];
    GPT_CHECK(y >= 0 && y < vocab_, "sampled softmax: target ", y, " at position ", t, " outside [0, ", vocab_, ")");
    if (in_c[static_cast<size_t>(y)] == 0) {
      in_c[static_cast<size_t>(y)] = 1;
      ++distinct;
    }
  }
  GPT_CHECK(distinct <= size, "sampled softmax: the microbatch has ", distinct,
            " distinct targets, more than the candidate set size P = ", size);
  const int64_t need = size - distinct;
  const int64_t take = std::min(vocab_, 17 * need / 10 + 256);  // ⌊1.7·need⌋ in exact integer arithmetic

  std::vector<int64_t> negatives;
  negatives.reserve(static_cast<size_t>(need));
  int64_t& offset = offsets_.data<int64_t>()[slice];
  for (int64_t i = 0; i < take && static_cast<int64_t>(negatives.size()) < need; ++i) {
    const int64_t c = sweep_entry(offset + i, vocab_);
    if (in_c[static_cast<size_t>(c)] == 0) negatives.push_back(c);  // take ≤ V: sweep entries are distinct
  }
  offset = (offset + take) % vocab_;
  if (static_cast<int64_t>(negatives.size()) < need) {
    // Fallback: every stride-th free class, ascending. stride·need ≤ free, so `need` of them always exist.
    negatives.clear();
    const int64_t free = vocab_ - distinct;
    const int64_t stride = std::max<int64_t>(1, free / need);
    int64_t free_index = 0;
    for (int64_t c = 0; c < vocab_ && static_cast<int64_t>(negatives.size()) < need; ++c) {
      if (in_c[static_cast<size_t>(c)] != 0) continue;
      if (free_index % stride == 0) negatives.push_back(c);
      ++free_index;
    }
  }
  for (int64_t c : negatives) in_c[static_cast<size_t>(c)] = 1;
  std::vector<int64_t> candidates;
  candidates.reserve(static_cast<size_t>(size));
  for (int64_t c = 0; c < vocab_; ++c) {
    if (in_c[static_cast<size_t>(c)] != 0) candidates.push_back(c);
  }
  GPT_CHECK(static_cast<int64_t>(candidates.size()) == size, "sampled softmax: built ", candidates.size(),
            " candidates, expected P = ", size);
  return candidates;
}

SampledSoftmaxInputs sampled_softmax_inputs(std::span<const int64_t> candidates, std::span<const int64_t> targets,
                                            std::span<const int64_t> prefix_table, Device device) {
  const auto size = static_cast<int64_t>(candidates.size());
  GPT_CHECK(size >= 1, "sampled softmax: the candidate set is empty");
  for (int64_t j = 1; j < size; ++j) {
    GPT_CHECK(candidates[j - 1] < candidates[j], "sampled softmax: candidates must be sorted and distinct, entry ", j,
              " is ", candidates[j], " after ", candidates[j - 1]);
  }
  // Position of class c in C, or −1.
  auto position = [&](int64_t c) -> int64_t {
    const auto it = std::lower_bound(candidates.begin(), candidates.end(), c);
    return it != candidates.end() && *it == c ? static_cast<int64_t>(it - candidates.begin()) : -1;
  };
  SampledSoftmaxInputs out;
  out.candidates = Tensor::empty({size}, DType::i64);
  std::copy(candidates.begin(), candidates.end(), out.candidates.data<int64_t>());
  out.targets = Tensor::empty({static_cast<int64_t>(targets.size())}, DType::i64);
  int64_t* y = out.targets.data<int64_t>();
  for (size_t t = 0; t < targets.size(); ++t) {
    y[t] = position(targets[t]);
    GPT_CHECK(y[t] >= 0, "sampled softmax: target ", targets[t], " at position ", t, " is not in the candidate set");
  }
  if (!prefix_table.empty()) {
    out.prefix_table = Tensor::empty({size}, DType::i64);
    int64_t* p = out.prefix_table.data<int64_t>();
    for (int64_t j = 0; j < size; ++j) {
      const int64_t c = candidates[static_cast<size_t>(j)];
      GPT_CHECK(c >= 0 && c < static_cast<int64_t>(prefix_table.size()), "sampled softmax: candidate ", c,
                " outside the prefix table's ", prefix_table.size(), " entries");
      const int64_t prefix = prefix_table[static_cast<size_t>(c)];
      p[j] = prefix < 0 ? -1 : position(prefix);  // a prefix target outside C drops the prefix term (§S.4)
    }
  }
  if (device != Device::cpu) {
    out.candidates = out.candidates.to(device);
    out.targets = out.targets.to(device);
    if (out.prefix_table.defined()) out.prefix_table = out.prefix_table.to(device);
  }
  return out;
}

}  // namespace gpt
