#include "trainer/optim/optimizer.h"

#include <algorithm>
#include <functional>

#include "kernels/transpose.h"

namespace gpt {

namespace {

// A bank viewed as its stack of matrices [count, rows, cols] (mlp_bank 12×2×3072×768 → 24×3072×768).
Tensor as_stack(const Tensor& t) { return t.view({-1, t.size(-2), t.size(-1)}); }

Tensor chunk(const Tensor& t, int rank, int64_t per_rank) { return t.slice(rank * per_rank, (rank + 1) * per_rank); }

}  // namespace

Optimizer::Optimizer(ParameterSet& params, const Recipe& recipe, Comm& comm)
    : params_(params), recipe_(recipe), comm_(comm) {
  const int world = comm_.world_size();
  const int rank = comm_.rank();
  const std::string& bank_opt = recipe_.extensions.bank_opt;
  GPT_CHECK(bank_opt == "normuon" || bank_opt == "anvil", "optimizer: recipe '", recipe_.name,
            "' has extensions.bank_opt = '", bank_opt, "', expected 'normuon' or 'anvil'");
  if (bank_opt == "anvil") {
    bank_optimizer_ = BankOptimizer::anvil;
    total_steps_ = Schedule(recipe_).total_steps();
  }
  GPT_CHECK(!recipe_.extensions.value_embeds_on_cadence || recipe_.extensions.ngram_rows > 0, "recipe '", recipe_.name,
            "': extensions.value_embeds_on_cadence needs the n-gram table (extensions.ngram_rows > 0), whose events it "
            "follows");
  for (Parameter& p : params_.all()) {
    if (p.kind == ParamKind::bank) {
      auto it = recipe_.optimizer.banks.find(p.name);
      GPT_CHECK(it != recipe_.optimizer.banks.end(), "optimizer: bank '", p.name, "' has no entry optimizer.banks.",
                p.name, " in recipe '", recipe_.name, "'");
      const int64_t count = as_stack(p.value).size(0);
      GPT_CHECK(count % world == 0, "optimizer: bank '", p.name, "' has ", count,
                " matrices, not divisible by the world size ", world, " (pad the bank, RECIPE §2.2)");
      BankSlot slot;
      slot.param = &p;
      slot.config = it->second;
      slot.per_rank = count / world;
      const Tensor own = chunk(as_stack(p.value), rank, slot.per_rank);
      if (bank_optimizer_ == BankOptimizer::anvil) {
        slot.anvil = AnvilState::zeros(own);
      } else {
        slot.state = NorMuonState::zeros(own);
      }
      banks_.push_back(std::move(slot));
    } else {
      auto it = recipe_.optimizer.adam.find(p.name);
      GPT_CHECK(it != recipe_.optimizer.adam.end(), "optimizer: parameter '", p.name,
                "' has no Adam group optimizer.adam.", p.name, " in recipe '", recipe_.name, "'");
      AdamSlot slot;
      slot.param = &p;
      slot.group = it->second;
      Shape shape = p.value.shape();
      if (slot.group.sharded) {
        GPT_CHECK(p.value.ndim() >= 1 && p.value.size(0) % world == 0, "optimizer: sharded parameter '", p.name, "' ",
                  p.value.describe(), " needs a leading dimension divisible by the world size ", world);
        slot.rows_per_rank = p.value.size(0) / world;
        shape[0] = slot.rows_per_rank;
      }
      const DType sd = stat_dtype(p.value.dtype());
      slot.state.m = Tensor::zeros(shape, sd, p.value.device());
      slot.state.v = Tensor::zeros(shape, sd, p.value.device());
      adam_.push_back(std::move(slot));
    }
  }
  has_tied_pair_ = params_.contains("embed") && params_.contains("lm_head");
  if (has_tied_pair_) {
    const Tensor& e = params_.get("embed").value;
    const Tensor& l = params_.get("lm_head").value;
    GPT_CHECK(e.ndim() == 2 && l.ndim() == 2 && e.size(0) == l.size(1) && e.size(1) == l.size(0), "optimizer: embed ",
              e.describe(), " must be the transpose shape of lm_head ", l.describe());
  }
  tied_ = has_tied_pair_;
}

Optimizer::AdamSlot* Optimizer::find_adam(const std::string& name) {
  for (AdamSlot& s : adam_) {
    if (s.param->name == name) return &s;
  }
  return nullptr;
}

const Optimizer::AdamState& Optimizer::adam_state(const std::string& name) const {
  for (const AdamSlot& s : adam_) {
    if (s.param->name == name) return s.state;
  }
  GPT_FAIL("optimizer: no Adam parameter named '", name, "'");
}

const NorMuonState& Optimizer::bank_state(const std::string& name) const {
  GPT_CHECK(bank_optimizer_ == BankOptimizer::normuon, "optimizer: bank '", name,
            "' is updated by ANVIL (extensions.bank_opt = anvil): read anvil_state, not bank_state");
  for (const BankSlot& s : banks_) {
    if (s.param->name == name) return s.state;
  }
  GPT_FAIL("optimizer: no bank named '", name, "'");
}

const AnvilState& Optimizer::anvil_state(const std::string& name) const {
  GPT_CHECK(bank_optimizer_ == BankOptimizer::anvil, "optimizer: bank '", name,
            "' is updated by NorMuon (extensions.bank_opt = normuon): read bank_state, not anvil_state");
  for (const BankSlot& s : banks_) {
    if (s.param->name == name) return s.anvil;
  }
  GPT_FAIL("optimizer: no bank named '", name, "'");
}

void Optimizer::restore_counters(const std::map<std::string, int64_t>& adam_steps, bool tied) {
  GPT_CHECK(adam_steps.size() == adam_.size(), "optimizer: restoring ", adam_steps.size(), " Adam step counters, ",
            "expected ", adam_.size());
  for (AdamSlot& s : adam_) {
    auto it = adam_steps.find(s.param->name);
    GPT_CHECK(it != adam_steps.end() && it->second >= 0, "optimizer: no valid saved step counter for '", s.param->name,
              "'");
    s.state.steps = it->second;
  }
  GPT_CHECK(!tied || has_tied_pair_, "optimizer: cannot restore a tie without both embed and lm_head");
  tied_ = tied;
}

bool Optimizer::on_table_cadence(const AdamSlot& slot) const {
  return recipe_.extensions.value_embeds_on_cadence && slot.param->name == "value_embeds";
}

void Optimizer::begin_step(const StepSchedule& s) {
  GPT_CHECK(!step_open_, "optimizer: begin_step(", s.step, ") while step ", open_step_,
            " is still open (step or abandon_step closes it)");
  plan_step(s);
  step_open_ = true;
  open_step_ = s.step;
}

// The plan of step s, in the fixed order every rank issues the reductions when no gradient is reported early.
void Optimizer::plan_step(const StepSchedule& s) {
  work_.clear();
  final_gradients_.clear();
  auto add = [this](BankSlot* bank, AdamSlot* adam, const AdamGroupConfig& group) {
    Work& w = work_.emplace_back();
    w.bank = bank;
    w.adam = adam;
    w.group = group;
    w.needs = {w.param().name};
    return std::ref(w);
  };
  for (BankSlot& slot : banks_) add(&slot, nullptr, {});
  if (s.adam_step) {
    for (AdamSlot& slot : adam_) {
      if (tied_ && slot.param->name == "embed") continue;  // folded into lm_head (§4.6)
      if (on_table_cadence(slot)) continue;                // §S.3: updated at the n-gram events instead
      Work& w = add(nullptr, &slot, slot.group);
      if (tied_ && slot.param->name == "lm_head") {
        w.needs.push_back("embed");
        w.fold_embed = true;
      }
    }
  }
  if (s.ngram_event) {
    for (AdamSlot& slot : adam_) {
      if (on_table_cadence(slot)) add(nullptr, &slot, table_cadence_group(slot, s));
    }
  }
}

void Optimizer::gradients_final(const std::vector<std::string>& names) {
  GPT_CHECK(step_open_, "optimizer: gradients_final outside an open step (begin_step first)");
  for (const std::string& name : names) {
    GPT_CHECK(params_.contains(name), "optimizer: gradients_final names '", name, "', which is no parameter");
    final_gradients_.insert(name);
  }
  for (Work& w : work_) {
    if (w.issued) continue;
    const bool ready =
        std::all_of(w.needs.begin(), w.needs.end(), [&](const std::string& n) { return final_gradients_.contains(n); });
    if (ready) issue_reduction(w);
  }
}

void Optimizer::abandon_step() {
  if (!step_open_) return;
  step_open_ = false;
  std::vector<Work> work = std::move(work_);
  work_.clear();
  final_gradients_.clear();
  for (Work& w : work) w.reduction.wait();
}

void Optimizer::issue_reduction(Work& w) {
  const int rank = comm_.rank();
  Parameter& p = w.param();
  if (w.fold_embed) {
    Parameter& embed = params_.get("embed");
    add_transposed(embed.grad, p.grad);  // both accumulated over the two steps
    embed.grad.zero_();
  }
  if (w.bank != nullptr) {
    Tensor grad = as_stack(p.grad);
    Tensor grad_chunk = chunk(grad, rank, w.bank->per_rank);
    w.reduction = comm_.reduce_scatter_async(grad, grad_chunk, ReduceOp::avg);
  } else if (w.adam->group.sharded) {
    Tensor grad_rows = chunk(p.grad, rank, w.adam->rows_per_rank);
    w.reduction = comm_.reduce_scatter_async(p.grad, grad_rows, ReduceOp::avg);
  } else {
    w.reduction = comm_.all_reduce_async(p.grad, ReduceOp::avg);
  }
  w.issued = true;
}

PendingCollective Optimizer::update(Work& w, const StepSchedule& s) {
  const int rank = comm_.rank();
  Parameter& p = w.param();
  w.reduction.wait();
  PendingCollective gather;
  if (w.bank != nullptr) {
    BankSlot& slot = *w.bank;
    Tensor value = as_stack(p.value);
    Tensor value_chunk = chunk(value, rank, slot.per_rank);
    Tensor grad_chunk = chunk(as_stack(p.grad), rank, slot.per_rank);
    if (bank_optimizer_ == BankOptimizer::anvil) {
      anvil_update(value_chunk, grad_chunk, slot.anvil, anvil_args(slot, s));
    } else {
      normuon_update(value_chunk, grad_chunk, slot.state, normuon_args(slot, s));
    }
    gather = comm_.all_gather_async(value_chunk, value);
  } else {
    AdamSlot& slot = *w.adam;
    const AdamArgs args = adam_args(slot, w.group, s.lr_mult);
    if (slot.group.sharded) {
      Tensor grad_rows = chunk(p.grad, rank, slot.rows_per_rank);
      Tensor value_rows = chunk(p.value, rank, slot.rows_per_rank);
      adam_update(value_rows, grad_rows, slot.state.m, slot.state.v, args);
      gather = comm_.all_gather_async(value_rows, p.value);
    } else {
      adam_update(p.value, p.grad, slot.state.m, slot.state.v, args);
    }
  }
  p.grad.zero_();
  return gather;
}

void Optimizer::step(const StepSchedule& s) {
  if (!step_open_) begin_step(s);
  GPT_CHECK(open_step_ == s.step, "optimizer: step(", s.step, ") while step ", open_step_, " is open");
  // Closes the step however this ends; unwaited handles wait in their destructors.
  struct Close {
    Optimizer& o;
    ~Close() {
      o.step_open_ = false;
      o.work_.clear();
      o.final_gradients_.clear();
    }
  } close{*this};
  for (Work& w : work_) {
    if (!w.issued) issue_reduction(w);
  }
  std::vector<PendingCollective> gathers;
  PendingCollective lm_head_gather;
  bool folded = false;
  for (Work& w : work_) {
    PendingCollective gather = update(w, s);
    if (w.fold_embed) {
      lm_head_gather = std::move(gather);
      folded = true;
    } else {
      gathers.push_back(std::move(gather));
    }
  }
  if (folded) {  // embed ← lm_headᵀ once lm_head has landed, while the other gathers run
    lm_head_gather.wait();
    transpose(params_.get("lm_head").value, params_.get("embed").value);
  }
  for (PendingCollective& g : gathers) g.wait();
  if (s.split_step && tied_) untie();
}

NorMuonArgs Optimizer::normuon_args(const BankSlot& slot, const StepSchedule& s) const {
  NorMuonArgs args;
  args.momentum = s.momentum;
  args.lr = recipe_.optimizer.bank_lr * s.lr_mult;
  args.weight_decay = recipe_.optimizer.bank_wd;
  args.beta2 = recipe_.optimizer.bank_beta2;
  args.odd_matrix_lr_mul = slot.config.odd_matrix_lr_mul;
  args.first_matrix = comm_.rank() * slot.per_rank;
  return args;
}

AnvilArgs Optimizer::anvil_args(const BankSlot& slot, const StepSchedule& s) const {
  const ExtensionsConfig& ext = recipe_.extensions;
  AnvilArgs args;
  args.step = s.step;
  args.total_steps = total_steps_;
  args.lr = recipe_.optimizer.bank_lr * s.lr_mult;
  args.weight_decay = ext.anvil_wd;
  args.beta2 = recipe_.optimizer.bank_beta2;
  args.rail_warmup = ext.anvil_rail_warmup;
  args.fast_switch = ext.anvil_fast_switch;
  args.rail_taper = ext.anvil_rail_taper;
  args.fast_weight = ext.anvil_fast_weight;
  args.odd_matrix_lr_mul = slot.config.odd_matrix_lr_mul;
  args.first_matrix = comm_.rank() * slot.per_rank;
  return args;
}

// §S.3: value_embeds on the n-gram table's cadence. Its gradient buffer has summed every step since the last
// event (nothing else clears it); the update is §4.5 Adam on the rank-averaged sum, dense over the owned rows.
// From the Adam group optimizer.adam.value_embeds: beta1, beta2, lr_mul and wd_mul (the seed recipes set
// (0.75, 0.95), 70, 5). From the seed table: from step extensions.ngram_late_step on, one event stands for two steps,
// so both betas are squared and wd_mul becomes extensions.ngram_wd_mul_late.
AdamGroupConfig Optimizer::table_cadence_group(const AdamSlot& slot, const StepSchedule& s) const {
  AdamGroupConfig group = slot.group;
  if (s.step >= recipe_.extensions.ngram_late_step) {
    group.beta1 *= group.beta1;
    group.beta2 *= group.beta2;
    group.wd_mul = recipe_.extensions.ngram_wd_mul_late;
  }
  return group;
}

AdamArgs Optimizer::adam_args(AdamSlot& slot, const AdamGroupConfig& group, double lr_mult) {
  AdamArgs args;
  args.lr = recipe_.optimizer.adam_lr * lr_mult * group.lr_mul;
  args.beta1 = group.beta1;
  args.beta2 = group.beta2;
  args.eps = recipe_.optimizer.adam_eps;
  args.weight_decay = recipe_.optimizer.adam_wd * group.wd_mul;
  args.step = ++slot.state.steps;
  return args;
}

void Optimizer::untie() {
  AdamSlot& lm = *find_adam("lm_head");
  AdamSlot& em = *find_adam("embed");
  const int world = comm_.world_size();
  const int rank = comm_.rank();
  const Tensor& lm_value = lm.param->value;
  // lm_head's state is sharded by its rows, embed's by its rows (lm_head's columns): gather, transpose, keep ours.
  for (auto [src, dst] : {std::pair{&lm.state.m, &em.state.m}, std::pair{&lm.state.v, &em.state.v}}) {
    Tensor full = src->view(src->shape());
    if (lm.group.sharded && world > 1) {
      full = Tensor::empty(lm_value.shape(), src->dtype(), src->device());
      comm_.all_gather(*src, full);
    }
    Tensor full_t = Tensor::empty({lm_value.size(1), lm_value.size(0)}, src->dtype(), src->device());
    transpose(full, full_t);
    dst->copy_from(em.group.sharded ? chunk(full_t, rank, em.rows_per_rank) : full_t);
  }
  em.state.steps = lm.state.steps;
  tied_ = false;
}

void Optimizer::reset() {
  abandon_step();
  for (AdamSlot& s : adam_) {
    s.state.m.zero_();
    s.state.v.zero_();
    s.state.steps = 0;
  }
  for (BankSlot& s : banks_) {
    if (bank_optimizer_ == BankOptimizer::anvil) {
      s.anvil.zero_();
    } else {
      s.state.zero_();
    }
  }
  tied_ = has_tied_pair_;
}

}  // namespace gpt
