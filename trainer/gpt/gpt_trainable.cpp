#include "trainer/gpt/gpt_trainable.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace gpt {

namespace {
ModelDims recipe_dims(const Recipe& recipe) {
  ModelDims d = model_dims(recipe.model, 1);
  d.ngram_rows = recipe.extensions.ngram_rows;
  return d;
}
}  // namespace

ModelDims model_dims(const ModelConfig& c, int64_t world_size) {
  ModelDims d;
  d.model_dim = c.model_dim;
  d.num_heads = c.num_heads;
  d.head_dim = c.head_dim;
  d.num_layers = c.num_layers;
  d.vocab = c.vocab_size;
  d.mlp_hidden = c.mlp_hidden;
  d.bigram_rows = c.bigram_rows;
  d.mudd_hidden = c.mudd_hidden;
  d.world_size = world_size;
  return d;
}

GptTrainable::GptTrainable(const Recipe& recipe, uint64_t seed, int64_t accumulation, DType dtype, Device device,
                           Comm* ngram_comm)
    : recipe_(recipe),
      schedule_(recipe),
      dims_(recipe_dims(recipe)),
      dtype_(dtype),
      device_(device),
      weights_(init_weights(dims_, seed, dtype, device)),
      yarn_events_(schedule_.yarn_events()),
      candidate_sampler_(dims_.vocab, static_cast<int>(std::max<int64_t>(1, recipe.slices_per_call))) {
  GPT_CHECK(accumulation >= 1, "GptTrainable: accumulation steps must be >= 1, got ", accumulation);
  register_parameters(weights_, params_);
  model_ = std::make_unique<GptModel>(dims_, params_, weights_.bigram_sign_table);
  if (dims_.ngram_rows > 0) {
    // §S.2: the sign pool is the bigram sign table; the table is not a parameter (no optimizer group needed).
    if (ngram_comm == nullptr) {
      ngram_comm_ = make_single_rank_comm();
      ngram_comm = ngram_comm_.get();
    }
    ngram_ = std::make_unique<NgramTable>(NgramTableOptions::from_recipe(recipe.extensions, dims_.model_dim, dtype),
                                          weights_.bigram_sign_table, *ngram_comm);
    model_->set_ngram_table(ngram_.get());
  }
  // Rows for the paired layout (2T) of the longest training slice and of a validation window.
  int64_t longest = recipe.validation.batch_tokens;
  for (int stage = 0; stage < schedule_.num_stages(); ++stage)
    longest = std::max(longest, schedule_.slice_tokens(stage));
  rotary_positions_ = 2 * longest;
  yarn_count_ = Tensor::zeros({1}, DType::i64);
  config_.accumulation_steps = accumulation;
  config_.fp8_lm_head = recipe.fp8;
  config_.fp8_mlp = recipe.fp8;
  rebuild_rotary(0);
  if (recipe.fp8) model_->refresh_fp8(true);
}

std::string GptTrainable::description() const {
  std::ostringstream out;
  out << "gpt d=" << dims_.model_dim << " H=" << dims_.num_heads << " Dh=" << dims_.head_dim
      << " L=" << dims_.num_layers << " V=" << dims_.vocab << " params=" << total_parameter_count(dims_)
      << " dtype=" << dtype_name(dtype_) << " fp8=" << (recipe_.fp8 ? "on" : "off");
  if (ngram_) out << " ngram_rows=" << dims_.ngram_rows;
  return out.str();
}

std::vector<NamedTensor> GptTrainable::buffers() {
  // The sign table is fixed; it is listed so snapshots and checkpoints cover every model tensor.
  std::vector<NamedTensor> out = {{"bigram_sign_table", weights_.bigram_sign_table}, {"yarn_events", yarn_count_}};
  if (uses_sampled_softmax()) out.push_back({"sampled_softmax_offsets", candidate_sampler_.offsets()});
  return out;
}

void GptTrainable::rebuild_rotary(int64_t events) {
  RotaryTables rotary(dims_.head_dim, rotary_positions_);
  for (int64_t i = 0; i < events; ++i) {
    rotary.apply_yarn(yarn_events_[static_cast<size_t>(i)].old_long_tokens,
                      yarn_events_[static_cast<size_t>(i)].new_long_tokens);
  }
  config_.rotary_cos = rotary.cos_table(dtype_, device_);
  config_.rotary_sin = rotary.sin_table(dtype_, device_);
  config_.attention_scale = rotary.attention_scale();
  built_events_ = events;
  yarn_count_.data<int64_t>()[0] = events;
}

void GptTrainable::set_schedule(const StepSchedule& s) {
  const auto events = static_cast<int64_t>(
      std::count_if(yarn_events_.begin(), yarn_events_.end(), [&](const YarnEvent& e) { return e.step <= s.step; }));
  if (events != built_events_ || yarn_count_.data<int64_t>()[0] != built_events_) rebuild_rotary(events);
  config_.window_short = s.ws_short_tokens;
  config_.window_long = s.ws_long_tokens;
  config_.mtp_weights.assign(s.mtp_weights.begin(), s.mtp_weights.end());
  config_.prefix_weight = static_cast<float>(s.prefix_weight);
  GPT_CHECK(s.sampled_softmax >= 0 && s.sampled_softmax <= dims_.vocab, "GptTrainable: step ", s.step,
            " has sampled softmax size P = ", s.sampled_softmax, ", expected 0 (full softmax) or 1..V = ", dims_.vocab);
  sampled_softmax_size_ = s.sampled_softmax;
}

double GptTrainable::train_microbatch(const Microbatch& batch, double loss_scale) {
  const auto accumulation = static_cast<int64_t>(1.0 / loss_scale + 0.5);
  GPT_CHECK(accumulation == config_.accumulation_steps, "GptTrainable: the run uses ", accumulation,
            " microbatches per step, the model was built for ", config_.accumulation_steps);
  double scaled_sum = 0;  // (1/A)·Σ_t ℓ_t (§3.3)
  if (sampled_softmax_size_ > 0) {
    StepConfig sampled = config_;
    const std::vector<int64_t> candidates = candidate_sampler_.build(batch.targets, sampled_softmax_size_, batch.slice);
    sampled.sampled_softmax = sampled_softmax_inputs(
        candidates, batch.targets,
        config_.prefix_table.defined() ? std::span<const int64_t>(prefix_host_) : std::span<const int64_t>(), device_);
    scaled_sum = model_->train_forward_backward(batch, sampled, tape_);
  } else {
    scaled_sum = model_->train_forward_backward(batch, config_, tape_);
  }
  return scaled_sum * static_cast<double>(accumulation) / static_cast<double>(batch.inputs.size());
}

double GptTrainable::fp8_lm_head_objective(const Microbatch& batch) {
  GPT_CHECK(dtype_ != DType::f64, "fp8_lm_head_objective: FP8 needs bf16/f32 activations");
  StepConfig fp8 = config_;
  fp8.fp8_lm_head = true;
  fp8.gradients_final = nullptr;  // no backward follows: nothing to report
  double objective = 0;
  try {
    objective = model_->train_forward(batch, fp8, tape_);
  } catch (...) {
    tape_.clear();
    throw;
  }
  tape_.clear();
  return objective;
}

void GptTrainable::refresh_fp8(bool bootstrap) {
  if (recipe_.fp8) model_->refresh_fp8(bootstrap);
}

void GptTrainable::after_state_restore() {
  if (!recipe_.fp8) return;
  model_->reset_fp8();
  model_->refresh_fp8(true);
}

double GptTrainable::validation_loss(const Microbatch& window) { return model_->validation_loss(window, config_); }

std::vector<double> GptTrainable::validation_losses(const Microbatch& window) {
  // §3.4: z = 23·σ((z_raw + 5)/7.5), ℓ_t = logsumexp(z_t) − z_t[target_t]. Rows are read back in chunks so that
  // the host never holds all T × V logits at once.
  constexpr int64_t kRowsPerRead = 256;
  const Tensor raw = model_->logits(window, config_);
  const int64_t rows = raw.size(0), vocab = raw.size(1);
  std::vector<double> losses(static_cast<size_t>(rows));
  std::vector<double> z(static_cast<size_t>(vocab));
  for (int64_t r0 = 0; r0 < rows; r0 += kRowsPerRead) {
    const int64_t r1 = std::min(rows, r0 + kRowsPerRead);
    const std::vector<float> chunk = raw.slice(r0, r1).to_floats();
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = chunk.data() + (r - r0) * vocab;
      double top = -INFINITY;
      for (int64_t v = 0; v < vocab; ++v) {
        z[static_cast<size_t>(v)] = 23.0 / (1.0 + std::exp(-(static_cast<double>(row[v]) + 5.0) / 7.5));
        top = std::max(top, z[static_cast<size_t>(v)]);
      }
      double sum = 0;
      for (int64_t v = 0; v < vocab; ++v) sum += std::exp(z[static_cast<size_t>(v)] - top);
      const int64_t target = window.targets[static_cast<size_t>(r)];
      GPT_CHECK(target >= 0 && target < vocab, "validation_losses: target ", target, " at position ", r,
                " outside the vocabulary [0, ", vocab, ")");
      losses[static_cast<size_t>(r)] = top + std::log(sum) - z[static_cast<size_t>(target)];
    }
  }
  return losses;
}

bool GptTrainable::uses_prefix_table() const {
  return std::any_of(recipe_.schedule.stages.begin(), recipe_.schedule.stages.end(),
                     [](const StageConfig& st) { return st.prefix_start != 0 || st.prefix_end != 0; });
}

void GptTrainable::set_prefix_table(std::span<const int64_t> table) {
  GPT_CHECK(static_cast<int64_t>(table.size()) == dims_.vocab, "GptTrainable: prefix table has ", table.size(),
            " entries, expected V = ", dims_.vocab);
  Tensor host = Tensor::empty({dims_.vocab}, DType::i64);
  std::memcpy(host.raw(), table.data(), table.size_bytes());
  config_.prefix_table = host.to(device_);
  prefix_host_.assign(table.begin(), table.end());
}

bool GptTrainable::uses_sampled_softmax() const {
  return std::any_of(recipe_.schedule.stages.begin(), recipe_.schedule.stages.end(), [](const StageConfig& st) {
    return std::any_of(st.sampled_softmax.begin(), st.sampled_softmax.end(), [](int64_t p) { return p > 0; });
  });
}

void GptTrainable::set_canonical_mask(const Tensor& mask) {
  if (!mask.defined()) {
    config_.canonical_mask = Tensor();
    return;
  }
  GPT_CHECK(
      mask.ndim() == 2 && mask.dtype() == DType::u8 && mask.size(0) == dims_.vocab && mask.size(1) * 8 == dims_.vocab,
      "GptTrainable: the canonical mask must be u8 [V, V/8] = [", dims_.vocab, ", ", dims_.vocab / 8, "], got ",
      mask.describe());
  config_.canonical_mask = mask.to(device_);
}

}  // namespace gpt
