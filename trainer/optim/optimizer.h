#pragma once
// The optimizer step of RECIPE §4 with the distributed semantics of §8:
//  - banks (ParamKind::bank): every step, reduce-scatter (avg) along the matrix axis, NorMuon (§4.3) or, with
//    recipe.seed.bank_opt = "anvil", ANVIL (§S.8) on the rank's chunk of count/W matrices (state for that chunk
//    only), all-gather the bank, clear the gradient;
//  - Adam parameters: only on odd steps, on the gradient accumulated over the two steps; groups from the
//    recipe's optimizer.adam table; `sharded` groups reduce-scatter rows (avg), update the rank's rows (state for
//    them only) and all-gather; the others all-reduce (avg) and update the whole tensor on every rank;
//  - tied embedding (§4.6) while step ≤ split: grad(lm_head) += grad(embed)ᵀ, only lm_head is reduced and
//    updated, then embed ← lm_headᵀ; at the end of the split step embed takes lm_head's Adam state transposed
//    (same step counter) and the two are untied;
//  - §S.3 (recipe.seed.value_embeds_on_cadence): value_embeds leaves the odd-step Adam and is updated at the
//    n-gram event steps (StepSchedule::ngram_event) on its gradient summed over the cycle (see step_table_cadence).
#include <map>
#include <memory>
#include <string>
#include <vector>

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

  // One optimizer step for schedule entry `s` (reads step, lr_mult, momentum, adam_step, split_step).
  void step(const StepSchedule& s);

  // §9.1 reset: zero every state and step counter and re-tie embed to lm_head.
  void reset();

  bool tied() const { return tied_; }

  // The bank optimizer the recipe selects (recipe.seed.bank_opt); its state is the only one allocated.
  enum class BankOptimizer { normuon, anvil };
  BankOptimizer bank_optimizer() const { return bank_optimizer_; }

  // State views for tests and checkpoints (the rank's shard).
  struct AdamState {
    Tensor m, v;
    int64_t steps = 0;
  };
  const AdamState& adam_state(const std::string& name) const;
  const NorMuonState& bank_state(const std::string& name) const;   // bank_optimizer() == normuon
  const AnvilState& anvil_state(const std::string& name) const;     // bank_optimizer() == anvil

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
    NorMuonState state;  // bank_opt = normuon
    AnvilState anvil;    // bank_opt = anvil
  };

  void step_banks(const StepSchedule& s);
  NorMuonArgs normuon_args(const BankSlot& slot, const StepSchedule& s) const;
  AnvilArgs anvil_args(const BankSlot& slot, const StepSchedule& s) const;
  void step_adam(const StepSchedule& s);
  void step_table_cadence(const StepSchedule& s);
  bool on_table_cadence(const AdamSlot& slot) const;
  void update_adam(AdamSlot& slot, const AdamGroupConfig& group, double lr_mult);
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
};

}  // namespace gpt
