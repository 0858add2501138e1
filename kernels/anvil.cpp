#include "kernels/anvil.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/gemm.h"

namespace gpt {

namespace {

void check_stack(const Tensor& param, const char* op) {
  GPT_CHECK(param.ndim() == 3, op, ": param must be a stack [count, rows, cols], got ", param.describe());
  GPT_CHECK(is_floating(param.dtype()), op, ": param must be f64, f32 or bf16, got ", param.describe());
}

Shape second_moment_shape(const Tensor& param) {
  const int64_t rows = param.size(1), cols = param.size(2);
  return {param.size(0), rows >= cols ? rows : cols};
}

void check_state_tensor(const Tensor& t, const Tensor& param, const char* op, const char* what) {
  check_shape(t, param.shape(), (std::string(op) + ": " + what).c_str());
  check_dtype(t, stat_dtype(param.dtype()), (std::string(op) + ": " + what).c_str());
}

// SPEEDRUN_ANVIL_TRACE=1 (read at each update), a debugging aid for a bank that goes non-finite: each update prints
// to stderr the matrix of the stack with the largest normalised X and every matrix whose X is not finite after the
// maps or whose normalised X exceeds 1 (the trace scaling bounds it by 1/1.05). Copies X to the host three times per
// update: slow, never for timing.
bool anvil_trace_on() {
  const char* v = std::getenv("SPEEDRUN_ANVIL_TRACE");
  return v != nullptr && std::string(v) == "1";
}

struct MatrixStats {
  double frobenius = 0, max_abs = 0;
  int64_t nonfinite = 0;
};

std::vector<MatrixStats> matrix_stats(const Tensor& x) {
  const std::vector<double> v = x.to(Device::cpu).to_doubles();
  const int64_t count = x.size(0), per = x.size(1) * x.size(2);
  std::vector<MatrixStats> out(static_cast<size_t>(count));
  for (int64_t m = 0; m < count; ++m) {
    MatrixStats& st = out[static_cast<size_t>(m)];
    for (int64_t i = m * per; i < (m + 1) * per; ++i) {
      const double e = v[static_cast<size_t>(i)];
      if (!std::isfinite(e)) {
        ++st.nonfinite;
        continue;
      }
      st.frobenius += e * e;
      st.max_abs = std::max(st.max_abs, std::abs(e));
    }
    st.frobenius = std::sqrt(st.frobenius);
  }
  return out;
}

void print_anvil_trace(const Tensor& param, const AnvilArgs& args, const std::vector<MatrixStats>& momentum,
                       const std::vector<MatrixStats>& normalised, const std::vector<MatrixStats>& mapped) {
  size_t widest = 0;
  for (size_t m = 0; m < normalised.size(); ++m) {
    if (normalised[m].frobenius > normalised[widest].frobenius) widest = m;
  }
  for (size_t m = 0; m < normalised.size(); ++m) {
    const bool suspect = mapped[m].nonfinite > 0 || normalised[m].nonfinite > 0 || normalised[m].frobenius > 1.0;
    if (m != widest && !suspect) continue;
    std::fprintf(stderr,
                 "anvil trace: step %lld, stack %lldx%lldx%lld, matrix %lld: |X|_F %.6g after the momentum "
                 "(%lld non-finite), %.6g after the trace scaling (%lld non-finite), max |X| %.6g after the maps "
                 "(%lld non-finite)%s\n",
                 static_cast<long long>(args.step), static_cast<long long>(param.size(0)),
                 static_cast<long long>(param.size(1)), static_cast<long long>(param.size(2)),
                 static_cast<long long>(args.first_matrix + static_cast<int64_t>(m)), momentum[m].frobenius,
                 static_cast<long long>(momentum[m].nonfinite), normalised[m].frobenius,
                 static_cast<long long>(normalised[m].nonfinite), mapped[m].max_abs,
                 static_cast<long long>(mapped[m].nonfinite), suspect ? "  <-- suspect" : "");
  }
}

}  // namespace

AnvilRails anvil_rails(const AnvilArgs& args) {
  GPT_CHECK(args.total_steps > 0 && args.step >= 0 && args.step < args.total_steps, "anvil: step ", args.step,
            " outside [0, total_steps = ", args.total_steps, ")");
  GPT_CHECK(args.rail_warmup > 0 && args.rail_taper > 0 && args.fast_switch >= 0,
            "anvil: extensions.anvil_rail_warmup and extensions.anvil_rail_taper must be > 0 and "
            "extensions.anvil_fast_switch >= 0, got ",
            args.rail_warmup, ", ", args.rail_taper, ", ", args.fast_switch);
  const double s = static_cast<double>(args.step);
  const double span = kAnvilRailPeak - kAnvilRailStart;
  const int64_t taper_from = args.total_steps - args.rail_taper;
  AnvilRails r;
  if (args.step < args.rail_warmup) {
    r.rail = kAnvilRailStart + span * s / static_cast<double>(args.rail_warmup);
  } else if (args.step > taper_from) {
    r.rail = kAnvilRailPeak - span * static_cast<double>(args.step - taper_from) / static_cast<double>(args.rail_taper);
  } else {
    r.rail = kAnvilRailPeak;
  }
  if (args.step < args.fast_switch) {
    r.fast_beta = r.rail;
    r.fast_weight = 1.0;
  } else {
    r.fast_beta = kAnvilFastBeta;
    r.fast_weight = args.fast_weight;
  }
  return r;
}

NorMuonArgs anvil_equalizer_args(const AnvilArgs& args) {
  NorMuonArgs shared;  // the equalizer and update of §4.3 with ANVIL's decay (its gate is the slow rail)
  shared.lr = args.lr;
  shared.weight_decay = args.weight_decay;
  shared.beta2 = args.beta2;
  shared.odd_matrix_lr_mul = args.odd_matrix_lr_mul;
  shared.first_matrix = args.first_matrix;
  return shared;
}

AnvilState AnvilState::zeros(const Tensor& param) {
  check_stack(param, "AnvilState");
  AnvilState s;
  const DType sd = stat_dtype(param.dtype());
  s.fast_rail = Tensor::zeros(param.shape(), sd, param.device());
  s.slow_rail = Tensor::zeros(param.shape(), sd, param.device());
  s.second_moment = Tensor::zeros(second_moment_shape(param), sd, param.device());
  if (param.dtype() == DType::bf16) s.mantissa = Tensor::zeros(param.shape(), DType::u16, param.device());
  return s;
}

void AnvilState::zero_() {
  fast_rail.zero_();
  slow_rail.zero_();
  second_moment.zero_();
  if (mantissa.defined()) mantissa.zero_();
}

void anvil_momentum(const Tensor& grad, Tensor& fast_rail, Tensor& slow_rail, Tensor& x, const AnvilRails& rails) {
  check_stack(grad, "anvil_momentum");
  check_state_tensor(fast_rail, grad, "anvil_momentum", "fast_rail");
  check_state_tensor(slow_rail, grad, "anvil_momentum", "slow_rail");
  check_shape(x, grad.shape(), "anvil_momentum: x");
  check_dtype(x, grad.dtype(), "anvil_momentum: x");
  check_same_device({&grad, &fast_rail, &slow_rail, &x}, "anvil_momentum");
  GPT_BACKEND_CALL(grad.device(), anvil_momentum, grad, fast_rail, slow_rail, x, rails);
}

void anvil_gram_normalize(Tensor& x, Tensor& gram) {
  check_stack(x, "anvil_gram_normalize");
  check_dtype(gram, x.dtype(), "anvil_gram_normalize: gram");
  check_same_device({&x, &gram}, "anvil_gram_normalize");
  short_side_gram(x, gram);
  GPT_BACKEND_CALL(x.device(), anvil_scale_by_trace, x, gram);
}

void anvil_apply(const Tensor& x, Tensor& second_moment, const Tensor& slow_rail, Tensor& param, Tensor& mantissa,
                 const AnvilArgs& args) {
  check_stack(param, "anvil_apply");
  check_shape(x, param.shape(), "anvil_apply: x");
  check_dtype(x, param.dtype(), "anvil_apply: x");
  check_shape(second_moment, second_moment_shape(param), "anvil_apply: second_moment");
  check_dtype(second_moment, stat_dtype(param.dtype()), "anvil_apply: second_moment");
  check_state_tensor(slow_rail, param, "anvil_apply", "slow_rail");
  if (param.dtype() == DType::bf16) {
    check_shape(mantissa, param.shape(), "anvil_apply: mantissa");
    check_dtype(mantissa, DType::u16, "anvil_apply: mantissa");
    check_same_device({&x, &second_moment, &slow_rail, &param, &mantissa}, "anvil_apply");
  } else {
    GPT_CHECK(!mantissa.defined(), "anvil_apply: a mantissa is only kept for bf16 params, got ", param.describe());
  }
  check_same_device({&x, &second_moment, &slow_rail, &param}, "anvil_apply");
  GPT_CHECK(args.first_matrix >= 0, "anvil_apply: first_matrix must be >= 0");
  GPT_BACKEND_CALL(param.device(), anvil_apply, x, second_moment, slow_rail, param, mantissa, args);
}

void anvil_update(Tensor& param, const Tensor& grad, AnvilState& state, const AnvilArgs& args) {
  check_stack(param, "anvil_update");
  check_shape(grad, param.shape(), "anvil_update: grad");
  check_dtype(grad, param.dtype(), "anvil_update: grad");
  const AnvilRails rails = anvil_rails(args);
  Tensor x = Tensor::empty(param.shape(), param.dtype(), param.device());
  anvil_momentum(grad, state.fast_rail, state.slow_rail, x, rails);
  const bool trace = anvil_trace_on();
  const std::vector<MatrixStats> momentum = trace ? matrix_stats(x) : std::vector<MatrixStats>{};
  const int64_t k = std::min(param.size(1), param.size(2));
  Tensor gram = Tensor::empty({param.size(0), k, k}, param.dtype(), param.device());
  anvil_gram_normalize(x, gram);
  const std::vector<MatrixStats> normalised = trace ? matrix_stats(x) : std::vector<MatrixStats>{};
  gram_polynomial_maps(x, kAnvilMaps, 6, gram, true);
  if (trace) print_anvil_trace(param, args, momentum, normalised, matrix_stats(x));
  anvil_apply(x, state.second_moment, state.slow_rail, param, state.mantissa, args);
}

}  // namespace gpt
