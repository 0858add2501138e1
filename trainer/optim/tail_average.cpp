#include "trainer/optim/tail_average.h"

#include <cmath>
#include <set>

#include "kernels/tail_average.h"

namespace gpt {

namespace {

// A bank viewed as its stack of matrices [count, rows, cols], as the optimizer splits it.
Tensor as_stack(const Tensor& t) { return t.view({-1, t.size(-2), t.size(-1)}); }

struct Listed {
  TailAccumulator accumulator;
  const char* weight;
};
// Registration order within an accumulator is the order below; the ship walks accumulators in enum order.
constexpr Listed kListed[] = {
    {TailAccumulator::tail_ema, "lm_head"},
    {TailAccumulator::tail_ema, "embed"},
    {TailAccumulator::tail_avg, "vo_bank"},
    {TailAccumulator::tail_avg, "mlp_bank"},
    {TailAccumulator::value_embed_avg, "value_embeds"},
    {TailAccumulator::bank_blend, "qk_bank"},
    {TailAccumulator::bank_blend, "vo_bank"},
    {TailAccumulator::bank_blend, "mlp_bank"},
};
// The weights whose norms the ship restores (§S.5).
constexpr const char* kNormRestored[] = {"embed", "lm_head", "mlp_bank", "qk_bank", "vo_bank"};

}  // namespace

const char* tail_accumulator_name(TailAccumulator a) {
  switch (a) {
    case TailAccumulator::tail_ema:
      return "tail_ema";
    case TailAccumulator::tail_avg:
      return "tail_avg";
    case TailAccumulator::value_embed_avg:
      return "value_embed_avg";
    case TailAccumulator::bank_blend:
      return "bank_blend";
  }
  return "?";
}

TailAverage::TailAverage(ParameterSet& params, const Recipe& recipe, const Comm& comm)
    : params_(params),
      config_(recipe.extensions),
      adam_groups_(recipe.optimizer.adam),
      rank_(comm.rank()),
      world_(comm.world_size()),
      enabled_(recipe.extensions.tail_average) {
  if (!enabled_) return;
  const ExtensionsConfig& c = config_;
  GPT_CHECK(c.tail_avg_every > 0 && c.bank_blend_every > 0, "recipe '", recipe.name,
            "': extensions.tail_avg_every and extensions.bank_blend_every must be positive, got ", c.tail_avg_every,
            " and ", c.bank_blend_every);
  accumulators_[static_cast<int>(TailAccumulator::tail_ema)].window = c.tail_ema_window;
  accumulators_[static_cast<int>(TailAccumulator::tail_avg)].window = c.tail_avg_window;
  accumulators_[static_cast<int>(TailAccumulator::value_embed_avg)].window = c.value_embed_avg_window;
  accumulators_[static_cast<int>(TailAccumulator::bank_blend)].window = c.bank_blend_window;
  for (const Listed& l : kListed) {
    if (!params_.contains(l.weight)) continue;
    Parameter& p = params_.get(l.weight);
    const std::string name = l.weight;
    double factor = 1;
    if (l.accumulator == TailAccumulator::tail_ema) factor = c.tail_ema_ship;
    if (l.accumulator == TailAccumulator::bank_blend)
      factor = name == "qk_bank" ? c.bank_blend_ship_qk : c.bank_blend_ship;
    const Tensor shard = shard_of(p);
    Slot slot{.param = &p,
              .acc = Tensor::zeros(shard.shape(), stat_dtype(p.value.dtype()), p.value.device()),
              .ship_factor = factor};
    accumulators_[static_cast<int>(l.accumulator)].slots.push_back(std::move(slot));
  }
  seeded_ = Tensor::zeros({kTailAccumulatorCount}, DType::u8);
}

bool TailAverage::is_sharded(const Parameter& p) const {
  if (p.kind == ParamKind::bank) return true;
  auto it = adam_groups_.find(p.name);
  return it != adam_groups_.end() && it->second.sharded;
}

Tensor TailAverage::shard_of(const Parameter& p) const {
  if (world_ == 1 || !is_sharded(p)) return p.value;
  const Tensor rows = p.kind == ParamKind::bank ? as_stack(p.value) : p.value;
  GPT_CHECK(rows.ndim() >= 1 && rows.size(0) % world_ == 0, "tail average: '", p.name, "' ", p.value.describe(),
            " cannot be split into ", world_, " equal shards along its ",
            p.kind == ParamKind::bank ? "matrices" : "rows");
  const int64_t per_rank = rows.size(0) / world_;
  return rows.slice(rank_ * per_rank, (rank_ + 1) * per_rank);
}

TailAverage::Fire TailAverage::rule(TailAccumulator a, int64_t step, int64_t n, bool ngram_event) const {
  const ExtensionsConfig& c = config_;
  if (step < n - accumulators_[static_cast<int>(a)].window) return {};
  switch (a) {
    case TailAccumulator::tail_ema: {
      const double r = c.tail_ema_rate;
      if (step == n - 1) return {true, r};
      if (step % 2 == 0) return {step == n - c.tail_ema_window, r};  // only the window's first step: the seed
      return {true, 1 - (1 - r) * (1 - r)};                          // an odd step stands for the pair of steps
    }
    case TailAccumulator::tail_avg:
      return {(n - 1 - step) % c.tail_avg_every == 0, c.tail_avg_rate};
    case TailAccumulator::value_embed_avg:
      return {ngram_event, c.tail_avg_rate};
    case TailAccumulator::bank_blend:
      return {step % c.bank_blend_every == 1 || step >= n - 2, c.bank_blend_rate};
  }
  return {};
}

void TailAverage::after_optimizer_step(const StepSchedule& s, int64_t total_steps) {
  if (!enabled_) return;
  GPT_CHECK(s.step >= 0 && s.step < total_steps, "tail average: step ", s.step, " outside the run's steps [0, ",
            total_steps, ")");
  uint8_t* seeded = seeded_.data<uint8_t>();
  for (int k = 0; k < kTailAccumulatorCount; ++k) {
    const Fire f = rule(static_cast<TailAccumulator>(k), s.step, total_steps, s.ngram_event);
    if (!f.fires) continue;
    const bool seed = seeded[k] == 0;
    for (Slot& slot : accumulators_[k].slots) tail_accumulate(slot.acc, shard_of(*slot.param), f.rate, seed);
    seeded[k] = 1;
  }
}

void TailAverage::ship(Comm& comm) {
  if (!enabled_) return;
  GPT_CHECK(comm.rank() == rank_ && comm.world_size() == world_, "tail average: ship on rank ", comm.rank(), " of ",
            comm.world_size(), ", built for rank ", rank_, " of ", world_);
  std::vector<std::pair<Parameter*, double>> norms;
  for (const char* name : kNormRestored) {
    if (!params_.contains(name)) continue;
    Parameter& p = params_.get(name);
    norms.emplace_back(&p, std::sqrt(sum_of_squares(p.value)));
  }
  const uint8_t* seeded = seeded_.data<uint8_t>();
  std::set<const Parameter*> shipped;
  for (int k = 0; k < kTailAccumulatorCount; ++k) {
    if (seeded[k] == 0) continue;
    for (Slot& slot : accumulators_[k].slots) {
      Tensor shard = shard_of(*slot.param);
      tail_ship(shard, slot.acc, slot.ship_factor);
      shipped.insert(slot.param);
    }
  }
  if (world_ > 1) {
    for (Parameter& p : params_.all()) {  // registration order: the same collectives on every rank
      if (!is_sharded(p) || (!shipped.contains(&p) && p.name != "value_embeds")) continue;
      Tensor full = p.kind == ParamKind::bank ? as_stack(p.value) : p.value;
      comm.all_gather(shard_of(p), full);
    }
  }
  for (auto& [p, before] : norms) {
    const double after = std::sqrt(sum_of_squares(p->value));
    if (after > 0) scale_in_place(p->value, before / after);
  }
}

void TailAverage::reset() {
  if (enabled_) seeded_.zero_();
}

std::vector<std::pair<std::string, Tensor>> TailAverage::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  if (!enabled_) return out;
  for (int k = 0; k < kTailAccumulatorCount; ++k) {
    for (const Slot& slot : accumulators_[k].slots) {
      out.emplace_back(
          std::string("tail/") + tail_accumulator_name(static_cast<TailAccumulator>(k)) + "/" + slot.param->name,
          slot.acc);
    }
  }
  out.emplace_back("tail/seeded", seeded_);
  return out;
}

bool TailAverage::seeded(TailAccumulator a) const {
  return enabled_ && seeded_.data<uint8_t>()[static_cast<int>(a)] != 0;
}

const Tensor& TailAverage::accumulator(TailAccumulator a, const std::string& weight) const {
  for (const Slot& slot : accumulators_[static_cast<int>(a)].slots) {
    if (slot.param->name == weight) return slot.acc;
  }
  GPT_FAIL("tail average: accumulator ", tail_accumulator_name(a), " holds no weight '", weight, "'");
}

}  // namespace gpt
