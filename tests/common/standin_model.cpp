#include "tests/common/standin_model.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "trainer/model/rng.h"

namespace gpt {

std::unique_ptr<TrainableModel> make_standin_model(const Recipe&, const RunOptions& options, Comm&) {
  return std::make_unique<StandinModel>(StandinDims{}, options.seed);
}

StandinModel::StandinModel(const StandinDims& dims, uint64_t seed) : dims_(dims) {
  const int64_t k = dims.classes, d = dims.width, h = dims.hidden;
  Rng rng(seed);
  std::vector<float> head(static_cast<size_t>(d * k));
  for (float& v : head) v = static_cast<float>(0.5 * rng.normal());
  std::vector<float> embed(static_cast<size_t>(k * d));
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t c = 0; c < k; ++c) embed[c * d + i] = head[i * k + c];  // tied: embed = lm_headᵀ
  }
  // mlp_bank [bank_layers, 2, hidden, d]: W1 uniform, W2 zero (as the GPT's banks, RECIPE §2.2). Only layer 0 is
  // used; the others are zero padding slots (zero gradient, zero update) so that the matrices divide among 1, 2, 4
  // or 8 ranks (RECIPE §8).
  std::vector<float> bank(static_cast<size_t>(dims.bank_layers * 2 * h * d), 0.0f);
  const double bound = std::sqrt(3.0) * 0.5 / std::sqrt(static_cast<double>(d));
  for (int64_t i = 0; i < h * d; ++i) bank[i] = static_cast<float>(rng.uniform(-bound, bound));
  const std::vector<float> scalars{1.0f};
  params_.add("embed", Tensor::from_floats(embed, {k, d}, DType::f32), ParamKind::adam);
  params_.add("lm_head", Tensor::from_floats(head, {d, k}, DType::f32), ParamKind::adam);
  params_.add("mlp_bank", Tensor::from_floats(bank, {dims.bank_layers, 2, h, d}, DType::f32), ParamKind::bank);
  params_.add("scalars", Tensor::from_floats(scalars, {1}, DType::f32), ParamKind::adam);
  schedule_state_ = Tensor::from_doubles(std::vector<double>{-1.0, 0.0}, {2}, DType::f64);
}

std::string StandinModel::description() const {
  std::ostringstream out;
  out << "standin hashed-bigram model (K=" << dims_.classes << " d=" << dims_.width << " hidden=" << dims_.hidden
      << "), not the GPT of RECIPE §2";
  return out.str();
}

std::vector<NamedTensor> StandinModel::buffers() { return {{"schedule_state", schedule_state_}}; }

void StandinModel::set_schedule(const StepSchedule& s) {
  double* state = schedule_state_.data<double>();
  state[0] = static_cast<double>(s.step);
  state[1] += 1.0;
}

double StandinModel::train_microbatch(const Microbatch& batch, double loss_scale) {
  GPT_CHECK(loss_scale > 0, "StandinModel: loss_scale must be positive, got ", loss_scale);
  return run(batch, loss_scale);
}

double StandinModel::validation_loss(const Microbatch& window) { return run(window, 0.0); }

double StandinModel::run(const Microbatch& batch, double loss_scale) {
  const int64_t k = dims_.classes, d = dims_.width, h = dims_.hidden;
  const int64_t tokens = static_cast<int64_t>(batch.inputs.size());
  GPT_CHECK(tokens > 0 && batch.targets.size() == batch.inputs.size(), "StandinModel: batch has ", tokens,
            " inputs and ", batch.targets.size(), " targets");
  Parameter& embed = params_.get("embed");
  Parameter& head = params_.get("lm_head");
  Parameter& bank = params_.get("mlp_bank");
  Parameter& scalar = params_.get("scalars");
  const float* e = embed.value.data<float>();
  const float* w = head.value.data<float>();
  const float* w1 = bank.value.data<float>();
  const float* w2 = w1 + h * d;
  const float lambda = scalar.value.data<float>()[0];
  const bool backward = loss_scale > 0;
  float* ge = backward ? embed.grad.data<float>() : nullptr;
  float* gw = backward ? head.grad.data<float>() : nullptr;
  float* gw1 = backward ? bank.grad.data<float>() : nullptr;
  float* gw2 = backward ? gw1 + h * d : nullptr;
  float* glambda = backward ? scalar.grad.data<float>() : nullptr;
  const float grad_scale = static_cast<float>(loss_scale / static_cast<double>(tokens));

  std::vector<float> a(h), r(h), mlp(d), y(d), logits(k), gy(d), gmlp(d), ga(h);
  double loss_sum = 0;
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t c = batch.inputs[t] % k;
    const int64_t target = batch.targets[t] % k;
    const float* z = e + c * d;
    for (int64_t j = 0; j < h; ++j) {
      float acc = 0;
      for (int64_t i = 0; i < d; ++i) acc += z[i] * w1[j * d + i];
      a[j] = acc;
      r[j] = acc > 0 ? acc * acc : 0.0f;
    }
    for (int64_t i = 0; i < d; ++i) {
      float acc = 0;
      for (int64_t j = 0; j < h; ++j) acc += r[j] * w2[j * d + i];
      mlp[i] = acc;
      y[i] = z[i] + lambda * acc;
    }
    float max_logit = -INFINITY;
    for (int64_t v = 0; v < k; ++v) {
      float acc = 0;
      for (int64_t i = 0; i < d; ++i) acc += y[i] * w[i * k + v];
      logits[v] = acc;
      max_logit = std::max(max_logit, acc);
    }
    double sum = 0;
    for (int64_t v = 0; v < k; ++v) sum += std::exp(static_cast<double>(logits[v] - max_logit));
    const double lse = static_cast<double>(max_logit) + std::log(sum);
    loss_sum += lse - static_cast<double>(logits[target]);
    if (!backward) continue;

    // ∂loss/∂logits = softmax − onehot, scaled by loss_scale / tokens.
    std::fill(gy.begin(), gy.end(), 0.0f);
    for (int64_t v = 0; v < k; ++v) {
      float g = static_cast<float>(std::exp(static_cast<double>(logits[v]) - lse));
      if (v == target) g -= 1.0f;
      g *= grad_scale;
      for (int64_t i = 0; i < d; ++i) {
        gw[i * k + v] += y[i] * g;
        gy[i] += w[i * k + v] * g;
      }
    }
    float gl = 0;
    for (int64_t i = 0; i < d; ++i) {
      gl += gy[i] * mlp[i];
      gmlp[i] = gy[i] * lambda;
    }
    glambda[0] += gl;
    for (int64_t j = 0; j < h; ++j) {
      float gr = 0;
      for (int64_t i = 0; i < d; ++i) {
        gw2[j * d + i] += r[j] * gmlp[i];
        gr += gmlp[i] * w2[j * d + i];
      }
      ga[j] = a[j] > 0 ? 2.0f * a[j] * gr : 0.0f;
    }
    float* gz = ge + c * d;
    for (int64_t i = 0; i < d; ++i) gz[i] += gy[i];
    for (int64_t j = 0; j < h; ++j) {
      for (int64_t i = 0; i < d; ++i) {
        gw1[j * d + i] += ga[j] * z[i];
        gz[i] += ga[j] * w1[j * d + i];
      }
    }
  }
  return loss_sum / static_cast<double>(tokens);
}

}  // namespace gpt
