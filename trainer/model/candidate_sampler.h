#pragma once
// RECIPE §S.4 sampled softmax, host side: the candidate set C of a microbatch and the remapped loss inputs.
//
// C holds every distinct target of the microbatch (this covers every MTP target, which are targets of other
// positions) plus negatives until |C| = P, sorted ascending. Negatives come from the sweep σ[k] = 20011·k mod V
// (a permutation of [0, V) since gcd(20011, 50304) = 1). Each slice index k of the loader call keeps an offset,
// initially ⌊V·k/8⌋ (§S.0: at W < 8 the state is per slice, so every slice sees what it would at W = 8). A build
//   takes the next take = min(V, ⌊1.7·need⌋ + 256) sweep entries cyclically from the offset (need = P − #targets),
//   advances the offset by take (mod V), drops the entries already in C and keeps the first `need`;
//   when fewer than `need` remain, the negatives are instead the classes not among the targets, in ascending
//   order, every stride-th one (stride = max(1, ⌊free/need⌋), free = V − #targets), the first `need` of them.
// The offset advances by `take` even when need = 0 (the formula gives take = 256) and on the fallback path.
// The sweep runs over the padded vocabulary (V = 50304), so the padding ids 50257–50303, which no target ever
// holds, can be negatives: they are real columns of lm_head and the reference samples them too.
//
// The offsets are the sampler's whole state: offsets() is a host i64 [slices] tensor that the model lists among
// its buffers, so checkpoints save it and the warmup reset restores it (§S.10); reset() sets the initial values.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/tensor.h"

namespace gpt {

inline constexpr int64_t kSweepMultiplier = 20011;
inline constexpr int64_t kSweepOffsetParts = 8;  // initial offset of slice k: ⌊V·k/8⌋

// σ[index mod V] = 20011·index mod V.
int64_t sweep_entry(int64_t index, int64_t vocab);

class CandidateSampler {
 public:
  // `vocab` = V (coprime with 20011); `slices` = slice indices per loader call (8 for the reference, 1 for tiny).
  CandidateSampler(int64_t vocab, int slices);

  // C for one microbatch of slice `slice`: P = `size` classes sorted ascending, every target among them.
  // Advances that slice's offset. Throws when a target is outside [0, V), P > V, or #distinct targets > P.
  std::vector<int64_t> build(std::span<const int64_t> targets, int64_t size, int slice);

  // §S.10 warmup reset: every offset back to ⌊V·k/8⌋.
  void reset();

  int64_t offset(int slice) const;
  int64_t vocab() const { return vocab_; }
  int slices() const { return static_cast<int>(offsets_.size(0)); }
  // The offsets as a host i64 [slices] tensor sharing the sampler's storage (checkpointed state).
  const Tensor& offsets() const { return offsets_; }

 private:
  int64_t vocab_;
  Tensor offsets_;
};

// The loss inputs of one microbatch with the vocabulary replaced by C (§S.4), on the model's device.
struct SampledSoftmaxInputs {
  Tensor candidates;    // i64 [P]: C, sorted ascending; undefined = full softmax
  Tensor targets;       // i64 [T]: position in C of each target
  Tensor prefix_table;  // i64 [P]: position in C of prefix_table[C[j]], −1 where that is −1 or not in C;
                        // undefined when the step has no prefix table
  bool active() const { return candidates.defined(); }
};

// Remaps a microbatch's targets and the §3.2 prefix table (host, indexed by class id; empty = no prefix table)
// onto C. Throws when C is not sorted and distinct or a target is not in C.
SampledSoftmaxInputs sampled_softmax_inputs(std::span<const int64_t> candidates, std::span<const int64_t> targets,
                                            std::span<const int64_t> prefix_table, Device device);

}  // namespace gpt
