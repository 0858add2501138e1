#include "trainer/model/ngram_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>

#include "base/check.h"
#include "kernels/ngram_embed.h"

namespace gpt {

namespace {

// Calls f.template operator()<T>() for the table's storage type (double, float, bf16).
template <typename F>
void with_table_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f64: f.template operator()<double>(); return;
    case DType::f32: f.template operator()<float>(); return;
    case DType::bf16: f.template operator()<bf16>(); return;
    default: GPT_FAIL("ngram table: unsupported dtype ", dtype_name(dtype), " (expected f64, f32 or bf16)");
  }
}

// Accumulation type of a storage type: double for f64, float otherwise.
template <typename T>
using acc_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
acc_of<T> load_value(T v) {
  return static_cast<acc_of<T>>(static_cast<std::conditional_t<std::is_same_v<T, bf16>, float, T>>(v));
}

template <typename T>
T store_value(acc_of<T> v) {
  if constexpr (std::is_same_v<T, bf16>) {
    return bf16(v);
  } else {
    return static_cast<T>(v);
  }
}

Tensor i32_tensor(std::span<const int32_t> values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i32);
  std::memcpy(t.raw(), values.data(), values.size_bytes());
  return t;
}

std::byte* row_ptr(Tensor& t, int64_t row) {
  return static_cast<std::byte*>(t.raw()) + static_cast<size_t>(row * t.size(-1)) * dtype_size(t.dtype());
}

int64_t max_count(const Tensor& counts) {
  int64_t m = 1;  // collectives need at least one element
  for (int64_t q = 0; q < counts.numel(); ++q) m = std::max(m, counts.data<int64_t>()[q]);
  return m;
}

}  // namespace

float round_to_fp16(float x) {
  if (!std::isfinite(x) || x == 0.0f) return x;
  const float a = std::fabs(x);
  if (a >= 65520.0f) return std::copysign(std::numeric_limits<float>::infinity(), x);  // past max 65504's half-ulp
  float r = 0;
  if (a < 0x1p-14f) {
    r = std::nearbyint(a * 0x1p24f) * 0x1p-24f;  // subnormal spacing 2^-24
  } else {
    int e = 0;
    (void)std::frexp(a, &e);  // a = m·2^e, m in [0.5, 1): 11 significant bits keep spacing 2^(e-11)
    r = std::ldexp(std::nearbyint(std::ldexp(a, 11 - e)), e - 11);
  }
  return std::copysign(r, x);
}

NgramTableOptions NgramTableOptions::from_recipe(const SeedConfig& seed, int64_t dim, DType dtype) {
  NgramTableOptions o;
  o.rows = seed.ngram_rows;
  o.dim = dim;
  o.dtype = dtype;
  o.lr = seed.ngram_lr;
  o.lr_mul = seed.ngram_lr_mul;
  o.wd = seed.ngram_wd;
  o.eps = seed.ngram_eps;
  o.beta2 = seed.ngram_beta2;
  o.wd_mul_early = seed.ngram_wd_mul_early;
  o.wd_mul_late = seed.ngram_wd_mul_late;
  o.late_step = seed.ngram_late_step;
  return o;
}

NgramTable::NgramTable(NgramTableOptions options, Tensor sign_pool, Comm& comm)
    : options_(options), pool_(std::move(sign_pool)), comm_(comm) {
  const int64_t V = options_.rows, d = options_.dim;
  const int W = comm_.world_size();
  GPT_CHECK(V >= 4 && V % 2 == 0 && V <= std::numeric_limits<int32_t>::max(),
            "ngram table: recipe.seed.ngram_rows must be even, >= 4 and below 2^31, got ", V);
  GPT_CHECK(V % W == 0, "ngram table: ngram_rows ", V, " must be divisible by the world size ", W);
  GPT_CHECK(d > 0, "ngram table: dim must be positive, got ", d);
  GPT_CHECK(is_floating(options_.dtype), "ngram table: dtype must be f64, f32 or bf16, got ",
            dtype_name(options_.dtype));
  GPT_CHECK(
      pool_.defined() && pool_.ndim() == 2 && pool_.size(1) == d && pool_.dtype() == options_.dtype && pool_.is_cpu(),
      "ngram table: sign pool must be a CPU [rows, ", d, "] tensor of dtype ", dtype_name(options_.dtype), ", got ",
      pool_.defined() ? pool_.describe() : std::string("none"), " (the n-gram table has no CUDA path yet)");
  GPT_CHECK(options_.beta2 > 0 && options_.beta2 < 1, "ngram table: beta2 must be in (0, 1), got ", options_.beta2);
  rows_per_rank_ = V / W;
  first_row_ = comm_.rank() * rows_per_rank_;
  shard_ = Tensor::zeros({rows_per_rank_, d}, options_.dtype);
  second_moment_.assign(static_cast<size_t>(rows_per_rank_), 0.0f);
  stamps_.assign(static_cast<size_t>(rows_per_rank_), 0);
}

void NgramTable::check_batch(std::span<const int32_t> rows, std::span<const int32_t> sign_rows,
                             const char* op) const {
  GPT_CHECK(!rows.empty(), op, ": the microbatch has no n-gram row ids (set ngram_rows = ", options_.rows,
            " in the train/validation loader options)");
  GPT_CHECK(rows.size() % 2 == 0 && sign_rows.size() == rows.size(), op, ": ngram_rows (", rows.size(),
            ") and ngram_sign_rows (", sign_rows.size(), ") must both hold 2T entries");
  for (size_t j = 0; j < rows.size(); ++j) {
    GPT_CHECK(rows[j] >= 0 && rows[j] < options_.rows, op, ": n-gram row id ", rows[j], " at entry ", j,
              " is outside the table [0, ", options_.rows, "); loader and recipe disagree on ngram_rows");
  }
}

NgramTable::LocalRows NgramTable::localize(std::span<const int32_t> rows) {
  LocalRows l;
  l.unique.assign(rows.begin(), rows.end());
  std::sort(l.unique.begin(), l.unique.end());
  l.unique.erase(std::unique(l.unique.begin(), l.unique.end()), l.unique.end());
  l.position.resize(rows.size());
  for (size_t j = 0; j < rows.size(); ++j) {
    l.position[j] = static_cast<int32_t>(std::lower_bound(l.unique.begin(), l.unique.end(), rows[j]) - l.unique.begin());
  }
  return l;
}

Tensor NgramTable::pull_rows(const std::vector<int32_t>& unique) {
  const int W = comm_.world_size(), me = comm_.rank();
  const int64_t d = options_.dim;
  Tensor count = Tensor::empty({1}, DType::i64);
  count.data<int64_t>()[0] = static_cast<int64_t>(unique.size());
  Tensor counts = Tensor::empty({W}, DType::i64);
  comm_.all_gather(count, counts);
  const int64_t width = max_count(counts);

  Tensor request = Tensor::empty({width}, DType::i32);
  std::fill_n(request.data<int32_t>(), width, -1);
  std::copy(unique.begin(), unique.end(), request.data<int32_t>());
  Tensor requests = Tensor::empty({W * width}, DType::i32);
  comm_.all_gather(request, requests);

  // Answer every rank's requests for the rows this rank owns (zeros elsewhere), then gather all answers.
  const size_t row_bytes = static_cast<size_t>(d) * dtype_size(options_.dtype);
  Tensor answers = Tensor::zeros({W * width, d}, options_.dtype);
  const int32_t* asked = requests.data<int32_t>();
  for (int64_t k = 0; k < W * width; ++k) {
    const int64_t row = asked[k];
    if (row >= first_row_ && row < first_row_ + rows_per_rank_) {
      std::memcpy(row_ptr(answers, k), row_ptr(shard_, row - first_row_), row_bytes);
    }
  }
  Tensor gathered = Tensor::empty({W * W * width, d}, options_.dtype);
  Tensor answers_flat = answers.view({-1});
  Tensor gathered_flat = gathered.view({-1});
  comm_.all_gather(answers_flat, gathered_flat);

  Tensor cache = Tensor::empty({static_cast<int64_t>(unique.size()), d}, options_.dtype);
  for (size_t j = 0; j < unique.size(); ++j) {
    const int64_t owner = unique[j] / rows_per_rank_;
    std::memcpy(row_ptr(cache, static_cast<int64_t>(j)),
                row_ptr(gathered, (owner * W + me) * width + static_cast<int64_t>(j)), row_bytes);
  }
  return cache;
}

Tensor NgramTable::forward(const Microbatch& batch) { return forward(batch.ngram_rows, batch.ngram_sign_rows); }

Tensor NgramTable::forward(std::span<const int32_t> rows, std::span<const int32_t> sign_rows) {
  check_batch(rows, sign_rows, "ngram forward");
  const auto tokens = static_cast<int64_t>(rows.size() / 2);
  Tensor out = Tensor::empty({tokens, options_.dim}, options_.dtype);
  const Tensor signs = i32_tensor(sign_rows);
  if (comm_.world_size() == 1) {
    ngram_embed_forward(shard_, pool_, i32_tensor(rows), signs, out);
  } else {
    const LocalRows local = localize(rows);
    const Tensor cache = pull_rows(local.unique);
    ngram_embed_forward(cache, pool_, i32_tensor(local.position), signs, out);
  }
  return out;
}

int64_t NgramTable::cycle_slot(int32_t row) {
  auto [it, inserted] = cycle_slot_.try_emplace(row, static_cast<int64_t>(cycle_order_.size()));
  if (!inserted) return it->second;
  cycle_order_.push_back(row);
  const auto needed = static_cast<int64_t>(cycle_order_.size());
  const int64_t capacity = cycle_grad_.defined() ? cycle_grad_.size(0) : 0;
  if (needed > capacity) {
    Tensor grown = Tensor::zeros({std::max<int64_t>(64, 2 * capacity), options_.dim}, stat_dtype(options_.dtype));
    if (capacity > 0) grown.slice(0, capacity).copy_from(cycle_grad_);
    cycle_grad_ = std::move(grown);
  }
  return it->second;
}

void NgramTable::accumulate_backward(const Microbatch& batch, const Tensor& dNg) {
  accumulate_backward(batch.ngram_rows, batch.ngram_sign_rows, dNg);
}

void NgramTable::accumulate_backward(std::span<const int32_t> rows, std::span<const int32_t> sign_rows,
                                     const Tensor& dNg) {
  check_batch(rows, sign_rows, "ngram backward");
  const auto tokens = static_cast<int64_t>(rows.size() / 2);
  const int64_t d = options_.dim;
  check_shape(dNg, {tokens, d}, "ngram backward: dNg");
  check_dtype(dNg, options_.dtype, "ngram backward: dNg");
  const LocalRows local = localize(rows);
  const auto n_unique = static_cast<int64_t>(local.unique.size());
  Tensor sums = Tensor::zeros({n_unique, d}, stat_dtype(options_.dtype));
  ngram_embed_backward(dNg, pool_, i32_tensor(local.position), i32_tensor(sign_rows), sums);
  std::vector<int64_t> slots(local.unique.size());
  for (size_t u = 0; u < local.unique.size(); ++u) slots[u] = cycle_slot(local.unique[u]);
  const bool fp16_cycle = options_.dtype == DType::bf16;
  auto add = [&]<typename A>() {
    const A* src = sums.data<A>();
    A* cycle = cycle_grad_.data<A>();
    for (int64_t u = 0; u < n_unique; ++u) {
      A* dst = cycle + slots[static_cast<size_t>(u)] * d;
      for (int64_t c = 0; c < d; ++c) {
        const A sum = dst[c] + src[u * d + c];
        if constexpr (std::is_same_v<A, float>) {
          dst[c] = fp16_cycle ? round_to_fp16(sum) : sum;
        } else {
          dst[c] = sum;
        }
      }
    }
  };
  if (options_.dtype == DType::f64) {
    add.template operator()<double>();
  } else {
    add.template operator()<float>();
  }
}

Tensor NgramTable::merge_cycle(std::vector<int32_t>& owned) {
  const int W = comm_.world_size();
  const int64_t d = options_.dim;
  const size_t row_bytes = static_cast<size_t>(d) * dtype_size(options_.dtype);
  // This rank's cycle sums, ascending by row, rounded to the exchange (table) dtype.
  std::vector<int32_t> mine = cycle_rows();
  const auto n = static_cast<int64_t>(mine.size());
  const int64_t width = W == 1 ? std::max<int64_t>(n, 1) : 0;
  Tensor local;
  auto round_rows = [&](Tensor& dst, int64_t count) {
    with_table_type(options_.dtype, [&]<typename T>() {
      using A = acc_of<T>;
      const A* cycle = cycle_grad_.defined() ? cycle_grad_.data<A>() : nullptr;
      T* out = dst.data<T>();
      for (int64_t i = 0; i < count; ++i) {
        const A* src = cycle + cycle_slot_.at(mine[static_cast<size_t>(i)]) * d;
        for (int64_t c = 0; c < d; ++c) out[i * d + c] = store_value<T>(src[c]);
      }
    });
  };
  if (W == 1) {
    owned = mine;
    local = Tensor::zeros({width, d}, options_.dtype);
    round_rows(local, n);
    return local;  // divided by W = 1: unchanged
  }
  Tensor count = Tensor::empty({1}, DType::i64);
  count.data<int64_t>()[0] = n;
  Tensor counts = Tensor::empty({W}, DType::i64);
  comm_.all_gather(count, counts);
  const int64_t pad = max_count(counts);
  Tensor ids = Tensor::empty({pad}, DType::i32);
  std::fill_n(ids.data<int32_t>(), pad, -1);
  std::copy(mine.begin(), mine.end(), ids.data<int32_t>());
  local = Tensor::zeros({pad, d}, options_.dtype);
  round_rows(local, n);
  Tensor all_ids = Tensor::empty({W * pad}, DType::i32);
  Tensor all_grads = Tensor::empty({W * pad, d}, options_.dtype);
  comm_.all_gather(ids, all_ids);
  Tensor local_flat = local.view({-1});
  Tensor all_grads_flat = all_grads.view({-1});
  comm_.all_gather(local_flat, all_grads_flat);

  // Contributions to each owned row in rank order (a rank lists a row at most once).
  std::map<int32_t, std::vector<int64_t>> sources;
  const int32_t* gathered = all_ids.data<int32_t>();
  for (int64_t k = 0; k < W * pad; ++k) {
    const int32_t row = gathered[k];
    if (row >= first_row_ && row < first_row_ + rows_per_rank_) sources[row].push_back(k);
  }
  owned.clear();
  Tensor merged = Tensor::zeros({std::max<int64_t>(static_cast<int64_t>(sources.size()), 1), d}, options_.dtype);
  with_table_type(options_.dtype, [&]<typename T>() {
    using A = acc_of<T>;
    const T* g = all_grads.data<T>();
    T* out = merged.data<T>();
    int64_t i = 0;
    for (const auto& [row, ks] : sources) {
      owned.push_back(row);
      T* dst = out + i * d;
      std::memcpy(dst, g + ks.front() * d, row_bytes);
      for (size_t q = 1; q < ks.size(); ++q) {
        for (int64_t c = 0; c < d; ++c) dst[c] = store_value<T>(load_value(dst[c]) + load_value(g[ks[q] * d + c]));
      }
      for (int64_t c = 0; c < d; ++c) dst[c] = store_value<T>(load_value(dst[c]) / static_cast<A>(W));
      ++i;
    }
  });
  return merged;
}

float NgramTable::owed_decay(float v, int64_t stamp) const {
  // Events stamp+1 .. events_-1 passed the row by: one fp32 multiply each, in order (as eager decay does).
  for (int64_t e = stamp + 1; e < events_; ++e) v = static_cast<float>(beta2_history_[static_cast<size_t>(e - 1)]) * v;
  return v;
}

void NgramTable::update_rows(const std::vector<int32_t>& owned, const Tensor& merged, double beta2, double lr,
                             double wd_mul) {
  const int64_t d = options_.dim;
  const int64_t e = events_;
  const auto beta = static_cast<float>(beta2);
  const auto one_minus_beta = static_cast<float>(1.0 - beta2);
  const double step_scale = lr * std::sqrt(1.0 - std::pow(beta2, static_cast<double>(e)));
  const double decay_scale = lr * lr * options_.wd * wd_mul;
  with_table_type(options_.dtype, [&]<typename T>() {
    using A = acc_of<T>;
    const T* g_all = merged.data<T>();
    T* table = shard_.data<T>();
    for (size_t i = 0; i < owned.size(); ++i) {
      const int64_t local = owned[i] - first_row_;
      const T* g = g_all + static_cast<int64_t>(i) * d;
      T* p = table + local * d;
      A square_sum = 0;
      for (int64_t c = 0; c < d; ++c) square_sum += load_value(g[c]) * load_value(g[c]);
      const auto mean_square = static_cast<float>(square_sum / static_cast<A>(d));
      float v = owed_decay(second_moment_[static_cast<size_t>(local)], stamps_[static_cast<size_t>(local)]);
      const float decayed = beta * v;
      v = decayed + one_minus_beta * mean_square;
      second_moment_[static_cast<size_t>(local)] = v;
      stamps_[static_cast<size_t>(local)] = e;
      const A denom = std::sqrt(static_cast<A>(v)) + static_cast<A>(options_.eps);
      for (int64_t c = 0; c < d; ++c) {
        const A pc = load_value(p[c]);
        A u = load_value(g[c]) / denom * static_cast<A>(step_scale);
        if (u * pc > 0) u += static_cast<A>(decay_scale) * pc;
        p[c] = store_value<T>(pc - u);
      }
    }
  });
  if (options_.eager_decay) {
    for (size_t local = 0; local < second_moment_.size(); ++local) {
      if (stamps_[local] == e) continue;
      second_moment_[local] = beta * second_moment_[local];
      stamps_[local] = e;
    }
  }
}

void NgramTable::apply_event(int64_t step, double lr_mult) {
  const bool late = step >= options_.late_step;
  const double beta2 = late ? options_.beta2 * options_.beta2 : options_.beta2;
  const double wd_mul = late ? options_.wd_mul_late : options_.wd_mul_early;
  const double lr = options_.lr * lr_mult * options_.lr_mul;
  std::vector<int32_t> owned;
  const Tensor merged = merge_cycle(owned);
  ++events_;
  beta2_history_.push_back(beta2);
  update_rows(owned, merged, beta2, lr, wd_mul);
  drop_cycle();
}

void NgramTable::drop_cycle() {
  cycle_order_.clear();
  cycle_slot_.clear();
  if (cycle_grad_.defined()) cycle_grad_.zero_();
}

void NgramTable::reset() {
  shard_.zero_();
  std::fill(second_moment_.begin(), second_moment_.end(), 0.0f);
  std::fill(stamps_.begin(), stamps_.end(), 0);
  beta2_history_.clear();
  events_ = 0;
  drop_cycle();
}

std::vector<int32_t> NgramTable::cycle_rows() const {
  std::vector<int32_t> rows = cycle_order_;
  std::sort(rows.begin(), rows.end());
  return rows;
}

std::vector<float> NgramTable::settled_second_moment() const {
  std::vector<float> v = second_moment_;
  for (size_t i = 0; i < v.size(); ++i) {
    for (int64_t e = stamps_[i] + 1; e <= events_; ++e) v[i] = static_cast<float>(beta2_history_[static_cast<size_t>(e - 1)]) * v[i];
  }
  return v;
}

std::vector<NamedTensor> NgramTable::checkpoint_tensors() const {
  const auto n_cycle = static_cast<int64_t>(cycle_order_.size());
  Tensor counters = Tensor::empty({4}, DType::i64);
  int64_t* c = counters.data<int64_t>();
  c[0] = events_;
  c[1] = n_cycle;
  c[2] = comm_.world_size();
  c[3] = comm_.rank();
  Tensor v = Tensor::empty({rows_per_rank_}, DType::f32);
  std::copy(second_moment_.begin(), second_moment_.end(), v.data<float>());
  Tensor stamps = Tensor::empty({rows_per_rank_}, DType::i64);
  std::copy(stamps_.begin(), stamps_.end(), stamps.data<int64_t>());
  // Variable-length parts keep at least one entry (the counters say how many are real).
  Tensor history = Tensor::zeros({std::max<int64_t>(events_, 1)}, DType::f64);
  std::copy(beta2_history_.begin(), beta2_history_.end(), history.data<double>());
  Tensor cycle_rows = Tensor::zeros({std::max<int64_t>(n_cycle, 1)}, DType::i32);
  std::copy(cycle_order_.begin(), cycle_order_.end(), cycle_rows.data<int32_t>());
  Tensor cycle_grad = Tensor::zeros({std::max<int64_t>(n_cycle, 1), options_.dim}, stat_dtype(options_.dtype));
  if (n_cycle > 0) cycle_grad.slice(0, n_cycle).copy_from(cycle_grad_.slice(0, n_cycle));
  return {{"ngram/counters", counters},       {"ngram/shard", shard_.clone()},
          {"ngram/second_moment", v},         {"ngram/stamps", stamps},
          {"ngram/beta2_history", history},   {"ngram/cycle_rows", cycle_rows},
          {"ngram/cycle_grad", cycle_grad}};
}

void NgramTable::restore_checkpoint(const std::vector<NamedTensor>& tensors) {
  auto find = [&](const std::string& name, const Shape& shape, DType dtype) -> const Tensor& {
    for (const NamedTensor& t : tensors) {
      if (t.name != name) continue;
      GPT_CHECK(t.tensor.shape() == shape && t.tensor.dtype() == dtype, "ngram checkpoint: '", name, "' is ",
                t.tensor.describe(), ", expected ", dtype_name(dtype), shape_string(shape));
      return t.tensor;
    }
    GPT_FAIL("ngram checkpoint: tensor '", name, "' is missing");
  };
  const Tensor counters = find("ngram/counters", {4}, DType::i64).to(Device::cpu);
  const int64_t* c = counters.data<int64_t>();
  const int64_t events = c[0], n_cycle = c[1];
  GPT_CHECK(c[2] == comm_.world_size() && c[3] == comm_.rank(), "ngram checkpoint: saved by rank ", c[3], " of ",
            c[2], ", restoring rank ", comm_.rank(), " of ", comm_.world_size());
  GPT_CHECK(events >= 0 && n_cycle >= 0, "ngram checkpoint: negative counters (events ", events, ", cycle rows ",
            n_cycle, ")");
  const Tensor shard = find("ngram/shard", {rows_per_rank_, options_.dim}, options_.dtype).to(Device::cpu);
  const Tensor v = find("ngram/second_moment", {rows_per_rank_}, DType::f32).to(Device::cpu);
  const Tensor stamps = find("ngram/stamps", {rows_per_rank_}, DType::i64).to(Device::cpu);
  const Tensor history = find("ngram/beta2_history", {std::max<int64_t>(events, 1)}, DType::f64).to(Device::cpu);
  const Tensor rows = find("ngram/cycle_rows", {std::max<int64_t>(n_cycle, 1)}, DType::i32).to(Device::cpu);
  const Tensor grad = find("ngram/cycle_grad", {std::max<int64_t>(n_cycle, 1), options_.dim},
                           stat_dtype(options_.dtype)).to(Device::cpu);
  for (int64_t i = 0; i < n_cycle; ++i) {
    const int32_t row = rows.data<int32_t>()[i];
    GPT_CHECK(row >= 0 && row < options_.rows, "ngram checkpoint: cycle row ", row, " outside [0, ", options_.rows,
              ")");
  }
  shard_.copy_from(shard);
  second_moment_.assign(v.data<float>(), v.data<float>() + rows_per_rank_);
  stamps_.assign(stamps.data<int64_t>(), stamps.data<int64_t>() + rows_per_rank_);
  beta2_history_.assign(history.data<double>(), history.data<double>() + events);
  events_ = events;
  drop_cycle();
  for (int64_t i = 0; i < n_cycle; ++i) cycle_slot(rows.data<int32_t>()[i]);
  if (n_cycle > 0) cycle_grad_.slice(0, n_cycle).copy_from(grad.slice(0, n_cycle));
}

}  // namespace gpt
