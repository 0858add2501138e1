#include "trainer/model/ngram_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>

#include "base/check.h"
#include "kernels/embedding.h"
#include "kernels/ngram_embed.h"
#include "kernels/ngram_update.h"

namespace gpt {

namespace {

// Calls f.template operator()<T>() for the table's storage type (double, float, bf16).
template <typename F>
void with_table_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f64:
      f.template operator()<double>();
      return;
    case DType::f32:
      f.template operator()<float>();
      return;
    case DType::bf16:
      f.template operator()<bf16>();
      return;
    default:
      GPT_FAIL("ngram table: unsupported dtype ", dtype_name(dtype), " (expected f64, f32 or bf16)");
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

// A copy on the host that shares nothing with `t` (checkpoints and host-side reads).
Tensor host_copy(const Tensor& t) { return t.is_cpu() ? t.clone() : t.to(Device::cpu); }

Tensor count_tensor(int64_t n) {
  Tensor t = Tensor::empty({1}, DType::i64);
  t.data<int64_t>()[0] = n;
  return t;
}

int64_t max_count(const Tensor& counts) {
  int64_t m = 1;  // collectives need at least one element
  for (int64_t q = 0; q < counts.numel(); ++q) m = std::max(m, counts.data<int64_t>()[q]);
  return m;
}

}  // namespace

NgramTableOptions NgramTableOptions::from_recipe(const ExtensionsConfig& ext, int64_t dim, DType dtype) {
  NgramTableOptions o;
  o.rows = ext.ngram_rows;
  o.dim = dim;
  o.dtype = dtype;
  o.lr = ext.ngram_lr;
  o.lr_mul = ext.ngram_lr_mul;
  o.wd = ext.ngram_wd;
  o.eps = ext.ngram_eps;
  o.beta2 = ext.ngram_beta2;
  o.wd_mul_early = ext.ngram_wd_mul_early;
  o.wd_mul_late = ext.ngram_wd_mul_late;
  o.late_step = ext.ngram_late_step;
  return o;
}

NgramTable::NgramTable(NgramTableOptions options, Tensor sign_pool, Comm& comm)
    : options_(options), pool_(std::move(sign_pool)), comm_(comm) {
  const int64_t V = options_.rows, d = options_.dim;
  const int W = comm_.world_size();
  GPT_CHECK(V >= 4 && V % 2 == 0 && V <= std::numeric_limits<int32_t>::max(),
            "ngram table: recipe.extensions.ngram_rows must be even, >= 4 and below 2^31, got ", V);
  GPT_CHECK(V % W == 0, "ngram table: ngram_rows ", V, " must be divisible by the world size ", W);
  GPT_CHECK(d > 0, "ngram table: dim must be positive, got ", d);
  GPT_CHECK(is_floating(options_.dtype), "ngram table: dtype must be f64, f32 or bf16, got ",
            dtype_name(options_.dtype));
  GPT_CHECK(pool_.defined() && pool_.ndim() == 2 && pool_.size(1) == d && pool_.dtype() == options_.dtype,
            "ngram table: sign pool must be a [rows, ", d, "] tensor of dtype ", dtype_name(options_.dtype), ", got ",
            pool_.defined() ? pool_.describe() : std::string("none"));
  device_ = pool_.device();
  GPT_CHECK(options_.beta2 > 0 && options_.beta2 < 1, "ngram table: beta2 must be in (0, 1), got ", options_.beta2);
  rows_per_rank_ = V / W;
  first_row_ = comm_.rank() * rows_per_rank_;
  shard_ = Tensor::zeros({rows_per_rank_, d}, options_.dtype, device_);
  second_moment_ = Tensor::zeros({rows_per_rank_}, DType::f32, device_);
  stamps_ = Tensor::zeros({rows_per_rank_}, DType::i64, device_);
}

Tensor NgramTable::device_ids(std::span<const int32_t> values) const { return i32_tensor(values).to(device_); }

Tensor NgramTable::all_gather_to_host(const Tensor& part) {
  const Tensor mine = part.to(device_);
  Tensor all = Tensor::empty({comm_.world_size() * part.numel()}, part.dtype(), device_);
  comm_.all_gather(mine, all);
  return all.to(Device::cpu);
}

void NgramTable::check_batch(std::span<const int32_t> rows, std::span<const int32_t> sign_rows, const char* op) const {
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
    l.position[j] =
        static_cast<int32_t>(std::lower_bound(l.unique.begin(), l.unique.end(), rows[j]) - l.unique.begin());
  }
  return l;
}

Tensor NgramTable::pull_rows(const std::vector<int32_t>& unique) {
  const int W = comm_.world_size(), me = comm_.rank();
  const int64_t d = options_.dim;
  const int64_t width = max_count(all_gather_to_host(count_tensor(static_cast<int64_t>(unique.size()))));

  Tensor request = Tensor::empty({width}, DType::i32);
  std::fill_n(request.data<int32_t>(), width, -1);
  std::copy(unique.begin(), unique.end(), request.data<int32_t>());
  const Tensor requests = all_gather_to_host(request);

  // Answer every rank's requests for the rows this rank owns (a request for another owner's row reads local row 0:
  // its asker ignores it), then gather all answers and keep each row's answer from its owner.
  std::vector<int32_t> local_rows(static_cast<size_t>(W * width), 0);
  const int32_t* asked = requests.data<int32_t>();
  for (int64_t k = 0; k < W * width; ++k) {
    const int64_t row = asked[k];
    if (row >= first_row_ && row < first_row_ + rows_per_rank_) {
      local_rows[static_cast<size_t>(k)] = static_cast<int32_t>(row - first_row_);
    }
  }
  Tensor answers = Tensor::empty({W * width, d}, options_.dtype, device_);
  embedding_forward(shard_, device_ids(local_rows), answers);
  Tensor gathered = Tensor::empty({W * W * width, d}, options_.dtype, device_);
  Tensor answers_flat = answers.view({-1});
  Tensor gathered_flat = gathered.view({-1});
  comm_.all_gather(answers_flat, gathered_flat);

  std::vector<int32_t> from_owner(unique.size());
  for (size_t j = 0; j < unique.size(); ++j) {
    const int64_t owner = unique[j] / rows_per_rank_;
    from_owner[j] = static_cast<int32_t>((owner * W + me) * width + static_cast<int64_t>(j));
  }
  Tensor cache = Tensor::empty({static_cast<int64_t>(unique.size()), d}, options_.dtype, device_);
  embedding_forward(gathered, device_ids(from_owner), cache);
  return cache;
}

Tensor NgramTable::forward(const Microbatch& batch) { return forward(batch.ngram_rows, batch.ngram_sign_rows); }

Tensor NgramTable::forward(std::span<const int32_t> rows, std::span<const int32_t> sign_rows) {
  check_batch(rows, sign_rows, "ngram forward");
  const auto tokens = static_cast<int64_t>(rows.size() / 2);
  Tensor out = Tensor::empty({tokens, options_.dim}, options_.dtype, device_);
  const Tensor signs = device_ids(sign_rows);
  if (comm_.world_size() == 1) {
    ngram_embed_forward(shard_, pool_, device_ids(rows), signs, out);
  } else {
    const LocalRows local = localize(rows);
    const Tensor cache = pull_rows(local.unique);
    ngram_embed_forward(cache, pool_, device_ids(local.position), signs, out);
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
    Tensor grown =
        Tensor::zeros({std::max<int64_t>(64, 2 * capacity), options_.dim}, stat_dtype(options_.dtype), device_);
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
  Tensor sums = Tensor::zeros({n_unique, d}, stat_dtype(options_.dtype), device_);
  ngram_embed_backward(dNg, pool_, device_ids(local.position), device_ids(sign_rows), sums);
  std::vector<int32_t> slots(local.unique.size());
  for (size_t u = 0; u < local.unique.size(); ++u) slots[u] = static_cast<int32_t>(cycle_slot(local.unique[u]));
  ngram_cycle_add(cycle_grad_, device_ids(slots), sums, options_.dtype == DType::bf16);
}

Tensor NgramTable::merge_cycle(std::vector<int32_t>& owned) {
  const int W = comm_.world_size();
  const int64_t d = options_.dim;
  // This rank's cycle sums, ascending by row, rounded to the exchange (table) dtype.
  std::vector<int32_t> mine = cycle_rows();
  const auto n = static_cast<int64_t>(mine.size());
  const int64_t width = W == 1 ? std::max<int64_t>(n, 1) : max_count(all_gather_to_host(count_tensor(n)));
  Tensor local = Tensor::zeros({width, d}, options_.dtype, device_);
  if (n > 0) {
    std::vector<int32_t> slots(mine.size());
    for (size_t i = 0; i < mine.size(); ++i) slots[i] = static_cast<int32_t>(cycle_slot_.at(mine[i]));
    Tensor rounded = local.slice(0, n);
    ngram_cycle_gather(cycle_grad_, device_ids(slots), rounded);
  }
  if (W == 1) {
    owned = mine;
    return local;  // divided by W = 1: unchanged
  }
  Tensor ids = Tensor::empty({width}, DType::i32);
  std::fill_n(ids.data<int32_t>(), width, -1);
  std::copy(mine.begin(), mine.end(), ids.data<int32_t>());
  const Tensor all_ids = all_gather_to_host(ids);
  Tensor all_grads_device = Tensor::empty({W * width, d}, options_.dtype, device_);
  Tensor local_flat = local.view({-1});
  Tensor all_grads_flat = all_grads_device.view({-1});
  comm_.all_gather(local_flat, all_grads_flat);
  const Tensor all_grads = all_grads_device.to(Device::cpu);

  // Contributions to each owned row in rank order (a rank lists a row at most once).
  std::map<int32_t, std::vector<int64_t>> sources;
  const int32_t* gathered = all_ids.data<int32_t>();
  for (int64_t k = 0; k < W * width; ++k) {
    const int32_t row = gathered[k];
    if (row >= first_row_ && row < first_row_ + rows_per_rank_) sources[row].push_back(k);
  }
  owned.clear();
  const size_t row_bytes = static_cast<size_t>(d) * dtype_size(options_.dtype);
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
  return merged.to(device_);
}

void NgramTable::update_rows(const std::vector<int32_t>& owned, const Tensor& merged, double beta2, double lr,
                             double wd_mul) {
  const auto n = static_cast<int64_t>(owned.size());
  if (n > 0) {
    std::vector<int32_t> local(owned.size());
    for (size_t i = 0; i < owned.size(); ++i) local[i] = static_cast<int32_t>(owned[i] - first_row_);
    NgramAdamStep step;
    step.event = events_;
    step.beta2 = beta2;
    step.step_scale = lr * std::sqrt(1.0 - std::pow(beta2, static_cast<double>(events_)));
    step.decay_scale = lr * lr * options_.wd * wd_mul;
    step.eps = options_.eps;
    ngram_sparse_adam(shard_, second_moment_, stamps_, beta2_history_f32_, device_ids(local), merged.slice(0, n), step);
  }
  if (options_.eager_decay) ngram_decay_untouched(second_moment_, stamps_, beta2, events_);
}

void NgramTable::apply_event(int64_t step, double lr_mult) {
  const bool late = step >= options_.late_step;
  const double beta2 = late ? options_.beta2 * options_.beta2 : options_.beta2;
  const double wd_mul = late ? options_.wd_mul_late : options_.wd_mul_early;
  const double lr = options_.lr * lr_mult * options_.lr_mul;
  std::vector<int32_t> owned;
  const Tensor merged = merge_cycle(owned);
  ++events_;
  record_beta2(beta2);
  update_rows(owned, merged, beta2, lr, wd_mul);
  drop_cycle();
}

void NgramTable::drop_cycle() {
  cycle_order_.clear();
  cycle_slot_.clear();
  if (cycle_grad_.defined()) cycle_grad_.zero_();
}

void NgramTable::record_beta2(double beta2) {
  beta2_history_.push_back(beta2);
  const auto needed = static_cast<int64_t>(beta2_history_.size());
  const int64_t capacity = beta2_history_f32_.defined() ? beta2_history_f32_.size(0) : 0;
  if (needed > capacity) {
    Tensor grown = Tensor::zeros({std::max<int64_t>(512, 2 * capacity)}, DType::f32, device_);
    if (capacity > 0) grown.slice(0, capacity).copy_from(beta2_history_f32_);
    beta2_history_f32_ = std::move(grown);
  }
  const std::vector<float> value{static_cast<float>(beta2)};
  beta2_history_f32_.slice(needed - 1, needed).copy_from(Tensor::from_floats(value, {1}, DType::f32));
}

void NgramTable::reset() {
  shard_.zero_();
  second_moment_.zero_();
  stamps_.zero_();
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
  const Tensor moment = host_copy(second_moment_), stamps = host_copy(stamps_);
  std::vector<float> v(moment.data<float>(), moment.data<float>() + rows_per_rank_);
  const int64_t* stamp = stamps.data<int64_t>();
  for (size_t i = 0; i < v.size(); ++i) {
    for (int64_t e = stamp[i] + 1; e <= events_; ++e)
      v[i] = static_cast<float>(beta2_history_[static_cast<size_t>(e - 1)]) * v[i];
  }
  return v;
}

std::vector<NamedTensor> NgramTable::live_tensors() const {
  std::vector<NamedTensor> out = {{"ngram/shard", shard_}, {"ngram/second_moment", second_moment_}};
  const auto n_cycle = static_cast<int64_t>(cycle_order_.size());
  if (n_cycle > 0) out.push_back({"ngram/cycle_grad", cycle_grad_.slice(0, n_cycle)});
  return out;
}

std::vector<NamedTensor> NgramTable::checkpoint_tensors() const {
  const auto n_cycle = static_cast<int64_t>(cycle_order_.size());
  Tensor counters = Tensor::empty({4}, DType::i64);
  int64_t* c = counters.data<int64_t>();
  c[0] = events_;
  c[1] = n_cycle;
  c[2] = comm_.world_size();
  c[3] = comm_.rank();
  // Variable-length parts keep at least one entry (the counters say how many are real).
  Tensor history = Tensor::zeros({std::max<int64_t>(events_, 1)}, DType::f64);
  std::copy(beta2_history_.begin(), beta2_history_.end(), history.data<double>());
  Tensor cycle_rows = Tensor::zeros({std::max<int64_t>(n_cycle, 1)}, DType::i32);
  std::copy(cycle_order_.begin(), cycle_order_.end(), cycle_rows.data<int32_t>());
  Tensor cycle_grad = Tensor::zeros({std::max<int64_t>(n_cycle, 1), options_.dim}, stat_dtype(options_.dtype));
  if (n_cycle > 0) cycle_grad.slice(0, n_cycle).copy_from(cycle_grad_.slice(0, n_cycle));
  return {{"ngram/counters", counters},
          {"ngram/shard", host_copy(shard_)},
          {"ngram/second_moment", host_copy(second_moment_)},
          {"ngram/stamps", host_copy(stamps_)},
          {"ngram/beta2_history", history},
          {"ngram/cycle_rows", cycle_rows},
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
  GPT_CHECK(c[2] == comm_.world_size() && c[3] == comm_.rank(), "ngram checkpoint: saved by rank ", c[3], " of ", c[2],
            ", restoring rank ", comm_.rank(), " of ", comm_.world_size());
  GPT_CHECK(events >= 0 && n_cycle >= 0, "ngram checkpoint: negative counters (events ", events, ", cycle rows ",
            n_cycle, ")");
  const Tensor shard = find("ngram/shard", {rows_per_rank_, options_.dim}, options_.dtype).to(Device::cpu);
  const Tensor v = find("ngram/second_moment", {rows_per_rank_}, DType::f32).to(Device::cpu);
  const Tensor stamps = find("ngram/stamps", {rows_per_rank_}, DType::i64).to(Device::cpu);
  const Tensor history = find("ngram/beta2_history", {std::max<int64_t>(events, 1)}, DType::f64).to(Device::cpu);
  const Tensor rows = find("ngram/cycle_rows", {std::max<int64_t>(n_cycle, 1)}, DType::i32).to(Device::cpu);
  const Tensor grad =
      find("ngram/cycle_grad", {std::max<int64_t>(n_cycle, 1), options_.dim}, stat_dtype(options_.dtype))
          .to(Device::cpu);
  for (int64_t i = 0; i < n_cycle; ++i) {
    const int32_t row = rows.data<int32_t>()[i];
    GPT_CHECK(row >= 0 && row < options_.rows, "ngram checkpoint: cycle row ", row, " outside [0, ", options_.rows,
              ")");
  }
  shard_.copy_from(shard);
  second_moment_.copy_from(v);
  stamps_.copy_from(stamps);
  beta2_history_.clear();
  for (int64_t e = 0; e < events; ++e) record_beta2(history.data<double>()[e]);
  events_ = events;
  drop_cycle();
  for (int64_t i = 0; i < n_cycle; ++i) cycle_slot(rows.data<int32_t>()[i]);
  if (n_cycle > 0) cycle_grad_.slice(0, n_cycle).copy_from(grad.slice(0, n_cycle));
}

}  // namespace gpt
