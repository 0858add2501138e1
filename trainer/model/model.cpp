// GptModel: argument checks, batch upload, and the order of the parts (input stage, layers 0-9, layer 10 + head,
// loss). The parts live in input_stage.cpp, attention_block.cpp, last_layer.cpp and head_loss.cpp.
#include "trainer/model/model.h"

#include <cstring>
#include <memory>

#include "kernels/arena.h"
#include "kernels/attention.h"
#include "kernels/flops.h"
#include "kernels/gemm.h"
#include "trainer/model/model_forward.h"

namespace gpt {

namespace {

bool is_bank_name(const std::string& name) { return name == "qk_bank" || name == "vo_bank" || name == "mlp_bank"; }

// The microbatch's index products packed into one block (each at an Arena-aligned offset), so that a CUDA
// microbatch costs a single host→device copy instead of one per product.
class PackedProducts {
 public:
  PackedProducts(int64_t tokens, int64_t cu_rows) : tokens_(tokens), cu_rows_(cu_rows) {
    targets_ = plan_.add({tokens}, DType::i64);
    inputs_ = plan_.add({tokens}, DType::i32);
    cu_ = plan_.add({cu_rows}, DType::i32);
    cu_doubled_ = plan_.add({cu_rows}, DType::i32);  // written on the device by double_cu_seqlens
    bigram_ = plan_.add({tokens}, DType::i32);
    sign_ = plan_.add({tokens}, DType::i32);
  }
  size_t bytes() const { return plan_.bytes(); }

  BatchTensors carve(const std::shared_ptr<Storage>& storage) const {
    BatchTensors b;
    b.tokens = tokens_;
    b.targets = Tensor::from_storage(storage, targets_, {tokens_}, DType::i64);
    b.inputs = Tensor::from_storage(storage, inputs_, {tokens_}, DType::i32);
    b.cu_seqlens = Tensor::from_storage(storage, cu_, {cu_rows_}, DType::i32);
    b.cu_seqlens_doubled = Tensor::from_storage(storage, cu_doubled_, {cu_rows_}, DType::i32);
    b.bigram_ids = Tensor::from_storage(storage, bigram_, {tokens_}, DType::i32);
    b.sign_rows = Tensor::from_storage(storage, sign_, {tokens_}, DType::i32);
    return b;
  }

 private:
  int64_t tokens_, cu_rows_;
  ArenaPlan plan_;
  size_t targets_ = 0, inputs_ = 0, cu_ = 0, cu_doubled_ = 0, bigram_ = 0, sign_ = 0;
};

template <typename T>
void fill(Tensor& dst, const std::vector<T>& values) {
  std::memcpy(dst.raw(), values.data(), values.size() * sizeof(T));
}

}  // namespace

BatchTensors upload_batch(const Microbatch& batch, Device device) {
  const auto tokens = static_cast<int64_t>(batch.inputs.size());
  GPT_CHECK(tokens > 0, "microbatch: inputs are empty");
  auto check_len = [tokens](size_t n, const char* field) {
    GPT_CHECK(static_cast<int64_t>(n) == tokens, "microbatch: ", field, " has ", n, " entries, expected T = ", tokens);
  };
  check_len(batch.targets.size(), "targets");
  check_len(batch.bigram_ids.size(), "bigram_ids");
  check_len(batch.sign_rows.size(), "sign_rows");
  GPT_CHECK(batch.cu_seqlens.size() >= 2, "microbatch: cu_seqlens needs at least 2 entries, got ",
            batch.cu_seqlens.size());
  const PackedProducts layout(tokens, static_cast<int64_t>(batch.cu_seqlens.size()));
  auto host_storage = std::make_shared<Storage>(Device::cpu, layout.bytes());
  BatchTensors host = layout.carve(host_storage);
  fill(host.targets, batch.targets);
  fill(host.inputs, batch.inputs);
  fill(host.cu_seqlens, batch.cu_seqlens);
  fill(host.bigram_ids, batch.bigram_ids);
  fill(host.sign_rows, batch.sign_rows);
  check_cu_seqlens_values(host.cu_seqlens, tokens, "microbatch: cu_seqlens");
  BatchTensors b = host;
  if (device != Device::cpu) {
    auto device_storage = std::make_shared<Storage>(device, layout.bytes());
    const auto bytes = static_cast<int64_t>(layout.bytes());
    Tensor::from_storage(device_storage, 0, {bytes}, DType::u8)
        .copy_from(Tensor::from_storage(host_storage, 0, {bytes}, DType::u8));
    b = layout.carve(device_storage);
  }
  double_cu_seqlens(b.cu_seqlens, b.cu_seqlens_doubled);
  return b;
}

void register_parameters(ModelWeights& weights, ParameterSet& params) {
  for (auto& [name, tensor] : weights.parameters())
    if (tensor->defined())  // bigram_embed is absent when the §S.2 n-gram table replaces it
      params.add(name, *tensor, is_bank_name(name) ? ParamKind::bank : ParamKind::adam);
}

GptModel::GptModel(const ModelDims& dims, ParameterSet& params, Tensor bigram_sign_table)
    : params_(params), dims_(dims), sign_table_(std::move(bigram_sign_table)) {
  for (const ParameterInfo& info : parameter_table(dims)) {
    GPT_CHECK(params.contains(info.name), "GptModel: parameter '", info.name, "' is not registered");
    const Parameter& p = params.get(info.name);
    GPT_CHECK(p.value.shape() == info.shape, "GptModel: parameter '", info.name, "' has shape ",
              shape_string(p.value.shape()), ", expected ", shape_string(info.shape));
  }
  const Tensor& embed = params.get("embed").value;
  check_shape(sign_table_, {dims.sign_rows, dims.model_dim}, "GptModel: bigram_sign_table");
  check_dtype(sign_table_, embed.dtype(), "GptModel: bigram_sign_table");
  check_dtype(params.get("scalars").value, stat_dtype(embed.dtype()), "GptModel: scalars");
  for (int64_t i = 0; i < dims.num_layers; ++i) mlp_fp8_.push_back(MlpFp8State::make(embed.device()));
}

void GptModel::set_ngram_table(NgramTable* table) {
  GPT_CHECK(table == nullptr || dims_.ngram_rows > 0, "GptModel: an n-gram table needs dims.ngram_rows > 0");
  if (table != nullptr) {
    GPT_CHECK(table->rows() == dims_.ngram_rows && table->options().dim == dims_.model_dim,
              "GptModel: n-gram table of ", table->rows(), " x ", table->options().dim, " rows, model expects ",
              dims_.ngram_rows, " x ", dims_.model_dim);
    GPT_CHECK(table->options().dtype == activation_dtype(), "GptModel: n-gram table dtype ",
              dtype_name(table->options().dtype), " differs from the model's ", dtype_name(activation_dtype()));
  }
  ngram_ = table;
}

DType GptModel::activation_dtype() const { return params_.get("embed").value.dtype(); }

namespace {

void check_step_config(const StepConfig& c, const ModelDims& dims, const BatchTensors& batch, DType dtype,
                       Device device, bool training) {
  GPT_CHECK(c.window_short > 0 && c.window_long > 0, "StepConfig: windows must be positive tokens, got short ",
            c.window_short, " long ", c.window_long);
  GPT_CHECK(c.attention_scale > 0, "StepConfig: attention_scale must be positive, got ", c.attention_scale);
  GPT_CHECK(c.rotary_cos.defined() && c.rotary_sin.defined(), "StepConfig: rotary tables are not set");
  for (const Tensor* t : {&c.rotary_cos, &c.rotary_sin}) {
    GPT_CHECK(t->ndim() == 2 && t->size(1) == dims.head_dim / 4 && t->size(0) >= 2 * batch.tokens,
              "StepConfig: rotary table must be [P >= 2T = ", 2 * batch.tokens, ", ", dims.head_dim / 4, "], got ",
              t->describe());
    check_dtype(*t, dtype, "StepConfig: rotary table");
    GPT_CHECK(t->device() == device, "StepConfig: rotary table on the wrong device: ", t->describe());
  }
  GPT_CHECK(c.validation_chunk_rows > 0, "StepConfig: validation_chunk_rows must be positive");
  if (!training) return;
  GPT_CHECK(!c.mtp_weights.empty(), "StepConfig: mtp_weights must hold at least one weight");
  GPT_CHECK(c.accumulation_steps >= 1, "StepConfig: accumulation_steps must be >= 1, got ", c.accumulation_steps);
  GPT_CHECK(!((c.fp8_lm_head || c.fp8_mlp) && dtype == DType::f64), "StepConfig: FP8 needs bf16/f32 activations");
  if (c.prefix_table.defined()) check_shape(c.prefix_table, {dims.vocab}, "StepConfig: prefix_table");
  const SampledSoftmaxInputs& s = c.sampled_softmax;
  if (s.active()) {
    GPT_CHECK(s.candidates.ndim() == 1 && s.candidates.size(0) >= 1 && s.candidates.size(0) <= dims.vocab,
              "StepConfig: sampled_softmax.candidates must be [P] with 1 <= P <= V = ", dims.vocab, ", got ",
              s.candidates.describe());
    check_shape(s.targets, {batch.tokens}, "StepConfig: sampled_softmax.targets");
    GPT_CHECK(s.prefix_table.defined() == c.prefix_table.defined(), "StepConfig: sampled_softmax.prefix_table must ",
              c.prefix_table.defined() ? "be set (the step has a prefix table)" : "be unset (the step has none)");
    if (s.prefix_table.defined()) {
      check_shape(s.prefix_table, s.candidates.shape(), "StepConfig: sampled_softmax.prefix_table");
    }
  }
}

// The parameters first read by a part of the forward (and only by later parts): the backward runs the parts in
// reverse, so their gradients are final once that part's backward has run. Keep in step with the parts' code
// (tests/model/gradients_final_test.cpp checks that no later backward op changes them).
const std::vector<std::string> kFinalAfterLoss = {"lm_head"};
const std::vector<std::string> kFinalAfterLastLayer = {"mudd_w1", "mudd_w2", "mudd_b2"};
const std::vector<std::string> kFinalAfterLayerLoop = {"qk_bank",      "vo_bank",       "mlp_bank",
                                                       "ve_gate_bank", "resid_lambdas", "post_lambdas"};

// Records a tape step that reports `names` final when the backward reaches it (after every op recorded later).
void mark_gradients_final(Tape& tape, const StepConfig& config, const std::vector<std::string>& names) {
  if (!config.gradients_final) return;
  tape.push([report = config.gradients_final, &names] { report(names); }, "gradients_final");
}

}  // namespace

double GptModel::train_forward(const Microbatch& batch, const StepConfig& config, Tape& tape) {
  GPT_CHECK(tape.size() == 0 && tape.enabled(), "train_forward: the tape must be enabled and empty");
  const Tensor& embed = params_.get("embed").value;
  const BatchTensors b = upload_batch(batch, embed.device());
  check_step_config(config, dims_, b, embed.dtype(), embed.device(), true);
  model_detail::Params p = model_detail::bind_params(params_);
  model_detail::Forward f(tape, dims_, config, b, p, sign_table_, config.fp8_mlp ? &mlp_fp8_ : nullptr);
  f.ngram = ngram_;
  f.microbatch = &batch;
  f.mlp_fp8_weights = &mlp_fp8_weights_;
  f.lm_head_fp8 = &lm_head_fp8_;
  if (config.fp8_lm_head) {
    // The §7.1 scales are constants of the accumulation count: made once, not uploaded per microbatch.
    if (lm_head_fp8_accumulation_ != config.accumulation_steps) {
      lm_head_fp8_scales_ = LmHeadFp8Scales::make(config.accumulation_steps, embed.device());
      lm_head_fp8_accumulation_ = config.accumulation_steps;
    }
    f.lm_head_fp8_scales = &lm_head_fp8_scales_;
  }
  try {
    model_detail::input_stage(f);
    mark_gradients_final(tape, config, kFinalAfterLayerLoop);
    model_detail::layer_loop(f);
    mark_gradients_final(tape, config, kFinalAfterLastLayer);
    const Var h = model_detail::last_layer_and_head(f);
    mark_gradients_final(tape, config, kFinalAfterLoss);
    return model_detail::training_loss(f, h);
  } catch (...) {
    tape.clear();
    throw;
  }
}

double GptModel::train_forward_backward(const Microbatch& batch, const StepConfig& config, Tape& tape) {
  const double loss = train_forward(batch, config, tape);
  try {
    if (config.after_forward) config.after_forward();
    tape.backward();
  } catch (...) {
    tape.clear();
    throw;
  }
  return loss;
}

namespace {

// The evaluation forward (no tape, no FP8) up to h = norm(x); `use` consumes h and the forward state.
template <typename Use>
auto evaluate(ParameterSet& params, const ModelDims& dims, const Tensor& sign_table, NgramTable* ngram,
              const Microbatch& batch, const StepConfig& config, Use use) {
  const Tensor& embed = params.get("embed").value;
  const BatchTensors b = upload_batch(batch, embed.device());
  check_step_config(config, dims, b, embed.dtype(), embed.device(), false);
  Tape tape;
  tape.set_enabled(false);
  model_detail::Params p = model_detail::bind_params(params);
  model_detail::Forward f(tape, dims, config, b, p, sign_table, nullptr);
  f.ngram = ngram;
  f.microbatch = &batch;
  model_detail::input_stage(f);
  model_detail::layer_loop(f);
  const Var h = model_detail::last_layer_and_head(f);
  return use(f, h);
}

}  // namespace

double GptModel::validation_loss(const Microbatch& batch, const StepConfig& config) {
  return evaluate(params_, dims_, sign_table_, ngram_, batch, config, [](model_detail::Forward& f, const Var& h) {
    return model_detail::validation_loss_sum(f, h) / static_cast<double>(f.batch.tokens);
  });
}

double GptModel::training_objective(const Microbatch& batch, const StepConfig& config) {
  StepConfig plain = config;
  plain.fp8_lm_head = plain.fp8_mlp = false;
  return evaluate(params_, dims_, sign_table_, ngram_, batch, plain, [&](model_detail::Forward& f, const Var& h) {
    check_step_config(plain, dims_, f.batch, h.value().dtype(), h.value().device(), true);
    return model_detail::training_loss(f, h);  // the disabled tape drops the gradient closure
  });
}

Tensor GptModel::logits(const Microbatch& batch, const StepConfig& config) {
  return evaluate(params_, dims_, sign_table_, ngram_, batch, config, [](model_detail::Forward& f, const Var& h) {
    const Tensor& lm_head = f.p.lm_head.value();
    Tensor z = Tensor::empty({f.batch.tokens, lm_head.size(1)}, h.value().dtype(), h.value().device());
    gemm(h.value(), lm_head, z);
    return z;
  });
}

void GptModel::refresh_fp8(bool bootstrap) {
  const Tensor bank = params_.get("mlp_bank").value.view({-1, dims_.model_dim});
  const int64_t hidden = dims_.mlp_hidden;
  mlp_fp8_weights_.clear();
  for (int64_t i = 0; i < dims_.num_layers; ++i) {
    const Tensor w1 = bank.slice(2 * i * hidden, (2 * i + 1) * hidden);
    const Tensor w2 = bank.slice((2 * i + 1) * hidden, (2 * i + 2) * hidden);
    MlpFp8State& state = mlp_fp8_[static_cast<size_t>(i)];
    mlp_fp8_refresh_w2_scale(w2, bootstrap, state);
    mlp_fp8_weights_.push_back(mlp_fp8_weights(w1, w2, state));
  }
  // w_s is a constant (§7.1), so the copy does not depend on the accumulation count: any made scales serve.
  if (lm_head_fp8_accumulation_ == 0) {
    lm_head_fp8_scales_ = LmHeadFp8Scales::make(1, bank.device());
    lm_head_fp8_accumulation_ = 1;
  }
  lm_head_fp8_ = lm_head_fp8_copy(params_.get("lm_head").value, lm_head_fp8_scales_);
}

void GptModel::reset_fp8() {
  for (MlpFp8State& s : mlp_fp8_) s.reset();
  mlp_fp8_weights_.clear();
  lm_head_fp8_ = {};
}

namespace {
FlopModel flop_model(const ModelDims& dims) {
  return FlopModel{.d = dims.model_dim, .mlp_hidden = dims.mlp_hidden, .vocab = dims.vocab};
}
}  // namespace

double model_flops_per_token(const ModelDims& dims, int64_t window_short, int64_t window_long) {
  return training_flops_per_token(flop_model(dims), window_short, window_long);
}

double model_validation_flops_per_token(const ModelDims& dims) {
  return validation_gemm_flops_per_token(flop_model(dims));
}

}  // namespace gpt
