#pragma once
// The optimizer step of RECIPE §4 with the distributed semantics of §8:
//  - banks (ParamKind::bank): every step, reduce-scatter (avg) along the matrix axis, NorMuon (§4.3) or, with
//    recipe.extensions.bank_opt = "anvil", ANVIL (§S.8) on the rank's chunk of count/W matrices (state for that chunk
//    only), all-gather the bank, clear the gradient;
//  - Adam parameters: only on odd steps, on the gradient accumulated over the two steps; groups from the
//    recipe's optimizer.adam table; `sharded` groups reduce-scatter rows (avg), update the rank's rows (state for
//    them only) and all-gather; the others all-reduce (avg) and update the whole tensor on every rank;
//  - tied embedding (§4.6) while step ≤ split: grad(lm_head) += grad(embed)ᵀ, only lm_head is reduced and
//    updated, then embed ← lm_headᵀ; at the end of the split step embed takes lm_head's Adam state transposed
//    (same step counter) and the two are untied;
//  - §S.3 (recipe.extensions.value_embeds_on_cadence): value_embeds leaves the odd-step Adam and is updated at the
//    n-gram event steps (StepSchedule::ngram_event) on its gradient summed over the cycle (see step_table_cadence).
//
// Communication schedule (as the record runs it): a step's gradient reductions (reduce-scatter or all-reduce) are
// issued asynchronously, all of them before the first update; then, parameter by parameter, wait for its reduction,
// update, issue its all-gather; every gather is waited for before step() returns. The reductions are issued in one
// fixed order on every rank: first those the backward of the step's last microbatch reports final
// (gradients_final: report order, then the plan order below within a report), so that they overlap the rest of
// the backward, then the others in plan order (banks, Adam parameters, the §S.3 cadence group; each in
// registration order). The math is that of blocking collectives: results are bitwise those of one
// reduce → update → gather after another.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernels/adam.h"
#include "kernels/anvil.h"
#include "kernels/normuon.h"
#include "trainer/comm/comm.h"
#include "trainer/model/parameter_set.h"
#include "trainer/recipe/recipe.h"
#include "trainer/schedule/schedule.h"

namespace gpt {

class Optimizer {
 public:
  // Builds state for every parameter of `params` (which must outlive the optimizer). Throws when a parameter
  // has no group in the recipe or its bank count / row count is not divisible by the world size.
  Optimizer(ParameterSet& params, const Recipe& recipe, Comm& comm);

  // Opens step `s` before the backward of its last microbatch, so that gradients_final can issue reductions.
  void begin_step(const StepSchedule& s);
  // The backward reports parameters (by name) whose gradients for the open step no later backward op changes:
  // every reduction of the step whose gradients are now all final is issued. Names the step does not reduce (an
  // Adam parameter on a bank-only step) are noted and otherwise ignored; unknown names throw. Every rank must
  // report the same names in the same order.
  void gradients_final(const std::vector<std::string>& names);
  // Closes an open step without updating (the run skips the step, e.g. for a non-finite loss): waits for the
  // reductions already issued. The gradients of those parameters are then rank averages, not local sums.
  void abandon_step();
  // One optimizer step for schedule entry `s` (reads step, lr_mult, momentum, adam_step, split_step); opens it
  // first when begin_step was not called.
  void step(const StepSchedule& s);

  // §9.1 reset: zero every state and step counter and re-tie embed to lm_head.
  void reset();

  bool tied() const { return tied_; }

  // The bank optimizer the recipe selects (recipe.extensions.bank_opt); its state is the only one allocated.
  enum class BankOptimizer { normuon, anvil };
  BankOptimizer bank_optimizer() const { return bank_optimizer_; }

  // State views for tests and checkpoints (the rank's shard).
  struct AdamState {
    Tensor m, v;
    int64_t steps = 0;
  };
  const AdamState& adam_state(const std::string& name) const;
  const NorMuonState& bank_state(const std::string& name) const;  // bank_optimizer() == normuon
  const AnvilState& anvil_state(const std::string& name) const;   // bank_optimizer() == anvil

  // Checkpoint resume: puts back the Adam step counters (by parameter name) and the embed/lm_head tie; the
  // state tensors themselves are restored through the handles above (they share storage).
  void restore_counters(const std::map<std::string, int64_t>& adam_steps, bool tied);

 private:
  struct AdamSlot {
    Parameter* param = nullptr;
    AdamGroupConfig group;
    int64_t rows_per_rank = 0;  // sharded groups: rows owned by each rank
    AdamState state;
  };
  struct BankSlot {
    Parameter* param = nullptr;
    BankConfig config;
    int64_t per_rank = 0;  // matrices owned by each rank
    NorMuonState state;    // bank_opt = normuon
    AnvilState anvil;      // bank_opt = anvil
  };

  // One parameter's share of the open step: its reduction, then its update (and all-gather).
  struct Work {
    BankSlot* bank = nullptr;  // exactly one of bank / adam
    AdamSlot* adam = nullptr;
    AdamGroupConfig group;           // Adam: the group this step updates with (§S.3 changes it late)
    std::vector<std::string> needs;  // parameters whose gradients the reduction reads
    bool fold_embed = false;         // tied Adam step: grad(lm_head) += grad(embed)ᵀ before the reduction
    bool issued = false;
    PendingCollective reduction;
    Parameter& param() const { return bank != nullptr ? *bank->param : *adam->param; }
  };

  void plan_step(const StepSchedule& s);
  void issue_reduction(Work& work);
  // Waits for the reduction, updates the rank's share, zeroes the gradient; returns the all-gather (if any).
  PendingCollective update(Work& work, const StepSchedule& s);
  NorMuonArgs normuon_args(const BankSlot& slot, const StepSchedule& s) const;
  AnvilArgs anvil_args(const BankSlot& slot, const StepSchedule& s) const;
  AdamGroupConfig table_cadence_group(const AdamSlot& slot, const StepSchedule& s) const;
  bool on_table_cadence(const AdamSlot& slot) const;
  AdamArgs adam_args(AdamSlot& slot, const AdamGroupConfig& group, double lr_mult);
  void untie();
  AdamSlot* find_adam(const std::string& name);

  ParameterSet& params_;
  Recipe recipe_;
  Comm& comm_;
  std::vector<AdamSlot> adam_;
  std::vector<BankSlot> banks_;
  BankOptimizer bank_optimizer_ = BankOptimizer::normuon;
  int64_t total_steps_ = 0;  // N, for ANVIL's rail schedule
  bool has_tied_pair_ = false;
  bool tied_ = false;
  // The open step (begin_step … step / abandon_step): its work in plan order and the gradients reported final.
  bool step_open_ = false;
  int64_t open_step_ = -1;
  std::vector<Work> work_;
  std::set<std::string> final_gradients_;
};

}  // namespace gpt
