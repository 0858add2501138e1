#pragma once
// The hashed n-gram table of RECIPE §S.2: storage (zero-initialised, the model dtype, NOT a model parameter), the
// cycle gradient, the merge across ranks and the sparse Adam with a lazily decayed per-row second moment.
//
// Life cycle, driven by the run loop:
//   forward(batch)                    every microbatch (training and validation): Ng [T, d];
//   accumulate_backward(batch, dNg)   every training microbatch (called by the taped op's backward);
//   apply_event(step, η(s))           inside the optimizer step of every event step (Schedule::is_ngram_event):
//                                     merge the cycle gradient across ranks, sparse Adam, clear the cycle;
//   drop_cycle()                      forget the pending cycle (gradient of steps after the last event is simply
//                                     never applied, so the run loop needs this only where it wants it explicit);
//   reset()                           §S.10: zero shard and Adam state in place, drop the pending cycle.
// The table is read-only inside a cycle, so pulling a microbatch's rows at its forward (below) reads exactly the
// rows the reference's per-cycle cache holds.
//
// Sharding (W ranks): rank r owns rows [r·V/W, (r+1)·V/W) and their Adam state. [project definition] A forward
// at W > 1 pulls the microbatch's sorted-unique rows from their owners with two all_gathers (the requested ids,
// padded to the largest request, then every owner's answers); at the event every rank all_gathers its cycle rows
// and gradients (padded likewise) and each owner merges the rows it owns. Every rank must call forward and
// apply_event the same number of times in the same order (they are collectives).
//
// Numerics (the readings taken):
//  - cycle gradient: per microbatch, each touched row's sum over its tokens in fp32 (f64 for f64 tables, token
//    order, kernels/ngram_embed.h), then added into the row's cycle sum with one rounding to the cycle precision:
//    fp16 for bf16 tables (held in fp32 storage, values rounded to fp16), the table dtype otherwise;
//  - exchange and merge: the cycle sums are rounded to the table dtype (bf16 for bf16), summed per row over the
//    ranks in rank order 0..W−1 with a rounding to the table dtype after each addition, then divided by W (exact
//    for W = 1, 2, 4, 8);
//  - Adam per touched row: kernels/ngram_update.h (ngram_sparse_adam), with lr_ng·√(1−β2^e) and β2^e in f64.
//    Untouched rows keep p; their v owes each event's β2, replayed in order when the row is next touched: bitwise
//    the same as decaying every row at every event (`eager_decay`).
//
// Placement: the shard, its second moment, stamps and β2 history, and the cycle sums live on the device of the sign
// pool (CPU or CUDA); row ids, sign rows and the cycle's row bookkeeping stay on the host and are copied per call.
// [project definition] At W > 1 the merge of the gathered cycle sums runs on the host (a CUDA table copies them
// there and back).
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernels/ngram_update.h"  // round_to_fp16
#include "kernels/tensor.h"
#include "trainer/comm/comm.h"
#include "trainer/data/train_loader.h"
#include "trainer/model/named_tensor.h"
#include "trainer/recipe/recipe.h"

namespace gpt {

struct NgramTableOptions {
  int64_t rows = 0;  // Vng (even, divisible by the world size)
  int64_t dim = 0;   // d
  DType dtype = DType::f32;
  double lr = 0.008, lr_mul = 70, wd = 0.005, eps = 1e-10;
  double beta2 = 0.95;  // before late_step; beta2² from late_step on
  double wd_mul_early = 5, wd_mul_late = 10;
  int64_t late_step = 336;
  // Decay every owned row's second moment at every event instead of lazily (tests: the two agree bitwise).
  bool eager_decay = false;

  static NgramTableOptions from_recipe(const ExtensionsConfig& ext, int64_t dim, DType dtype);
};

class NgramTable {
 public:
  // `sign_pool` [P, d] ±1 in the table dtype (the bigram_sign_table buffer); it and `comm` must outlive the table.
  NgramTable(NgramTableOptions options, Tensor sign_pool, Comm& comm);

  // Ng [T, d] (table dtype) for a microbatch with ngram_rows / ngram_sign_rows (2T each). Collective at W > 1.
  Tensor forward(const Microbatch& batch);
  Tensor forward(std::span<const int32_t> rows, std::span<const int32_t> sign_rows);
  // Adds the microbatch's gradient to the pending cycle: dNg [T, d] in the table dtype.
  void accumulate_backward(const Microbatch& batch, const Tensor& dNg);
  void accumulate_backward(std::span<const int32_t> rows, std::span<const int32_t> sign_rows, const Tensor& dNg);
  // The event of step `step` (collective): merge, sparse Adam with lr_ng = lr·lr_mult·lr_mul (lr_mult = η(s)),
  // clear the cycle. β2 and wd_mul follow the phase of `step` (late from late_step on).
  void apply_event(int64_t step, double lr_mult);
  void drop_cycle();
  void reset();

  // This rank's state, copied: shard, second moment, stamps, β2 history, counters and the pending cycle.
  // restore_checkpoint puts it back bit-exactly (names as returned; throws naming a missing or misshaped one).
  std::vector<NamedTensor> checkpoint_tensors() const;
  void restore_checkpoint(const std::vector<NamedTensor>& tensors);
  // The floating part of that state as handles sharing storage (no copy of the shard): shard, second moment and
  // the pending cycle's gradient rows.
  std::vector<NamedTensor> live_tensors() const;

  int64_t events() const { return events_; }
  int64_t rows() const { return options_.rows; }
  int64_t rows_per_rank() const { return rows_per_rank_; }
  const NgramTableOptions& options() const { return options_; }
  // This rank's shard [V/W, d] (shares storage) and per-row fp32 second moment (as stored: lazily decayed rows
  // are behind until touched; settled_second_moment() applies what they owe).
  const Tensor& shard() const { return shard_; }
  std::vector<float> settled_second_moment() const;
  // Rows with a pending cycle gradient, ascending.
  std::vector<int32_t> cycle_rows() const;

 private:
  // Sorted-unique rows of `rows` and each entry's position among them.
  struct LocalRows {
    std::vector<int32_t> unique;
    std::vector<int32_t> position;
  };
  static LocalRows localize(std::span<const int32_t> rows);
  Tensor pull_rows(const std::vector<int32_t>& unique);
  void check_batch(std::span<const int32_t> rows, std::span<const int32_t> sign_rows, const char* op) const;
  int64_t cycle_slot(int32_t row);
  // Merged gradient [n, d] (table dtype) of the owned rows `owned` touched by any rank, ascending.
  Tensor merge_cycle(std::vector<int32_t>& owned);
  void update_rows(const std::vector<int32_t>& owned, const Tensor& merged, double beta2, double lr, double wd_mul);
  // An i32 host vector as a tensor on the table's device.
  Tensor device_ids(std::span<const int32_t> values) const;
  // all_gather of a small host tensor [n] (counts, row ids) through the table's device: [W·n] on the host.
  Tensor all_gather_to_host(const Tensor& part);
  // Appends β2 of a new event to both histories.
  void record_beta2(double beta2);

  NgramTableOptions options_;
  Tensor pool_;
  Device device_ = Device::cpu;  // where the pool, the shard and all per-row state live
  Comm& comm_;
  int64_t rows_per_rank_ = 0;
  int64_t first_row_ = 0;
  Tensor shard_;                       // [V/W, d] table dtype
  Tensor second_moment_;               // f32 [V/W]
  Tensor stamps_;                      // i64 [V/W]: event count up to which the row's v is decayed
  std::vector<double> beta2_history_;  // β2 of event e at index e−1
  Tensor beta2_history_f32_;           // f32 [capacity ≥ events]: the same, rounded once, on the table's device
  int64_t events_ = 0;
  // Pending cycle: rows in first-touch order, their slots, and the sums [capacity, d] in the accumulation dtype.
  std::vector<int32_t> cycle_order_;
  std::unordered_map<int32_t, int64_t> cycle_slot_;
  Tensor cycle_grad_;
};

}  // namespace gpt
