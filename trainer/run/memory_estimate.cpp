#include "trainer/run/memory_estimate.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <new>
#include <numeric>
#include <sstream>

#include "base/check.h"
#include "trainer/model/weights.h"
#include "trainer/run/backend.h"
#include "trainer/gpt/gpt_trainable.h"

namespace gpt {

namespace {

constexpr const char* kModelKeys = "model.model_dim, model.vocab_size, model.mlp_hidden, model.bigram_rows";

// A field of a /proc file in kB ("MemAvailable:  123 kB"), in bytes.
std::optional<int64_t> proc_kib_field(const char* file, const std::string& field) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(field + ":", 0) != 0) continue;
    long long kib = 0;
    if (std::sscanf(line.c_str() + field.size() + 1, "%lld", &kib) == 1) return static_cast<int64_t>(kib) * 1024;
  }
  return std::nullopt;
}

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t product = 0;
  return __builtin_mul_overflow(a, b, &product) ? INT64_MAX : product;
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

}  // namespace

int64_t MemoryEstimate::total() const {
  return std::accumulate(parts.begin(), parts.end(), int64_t{0},
                         [](int64_t sum, const Part& p) { return saturating_add(sum, p.bytes); });
}

std::string MemoryEstimate::breakdown() const {
  std::string out;
  for (const Part& p : parts) {
    out += (out.empty() ? "" : ", ") + p.what + " " + format_bytes(p.bytes) + " (" + p.keys + ")";
  }
  return out;
}

const MemoryEstimate::Part* MemoryEstimate::part(const std::string& what) const {
  const auto it = std::find_if(parts.begin(), parts.end(), [&](const Part& p) { return p.what == what; });
  return it == parts.end() ? nullptr : &*it;
}

MemoryEstimate estimate_run_memory(const Recipe& recipe, Device device, int world_size) {
  const int64_t w = std::max(1, world_size);
  ModelDims dims = model_dims(recipe.model, w);
  dims.ngram_rows = recipe.extensions.ngram_rows;
  const int64_t value_bytes = static_cast<int64_t>(dtype_size(model_dtype(device)));
  int64_t parameter_bytes = 0, adam_elements = 0, bank_elements = 0;
  for (const ParameterInfo& p : parameter_table(dims)) {
    const int64_t n = std::accumulate(p.shape.begin(), p.shape.end(), int64_t{1}, saturating_mul);
    const int64_t bytes = p.dtype == DType::bf16 ? value_bytes : 4;  // bf16 storage is f32 on the CPU (§R.1)
    parameter_bytes = saturating_add(parameter_bytes, saturating_mul(n, bytes));
    (p.is_bank ? bank_elements : adam_elements) = saturating_add(p.is_bank ? bank_elements : adam_elements, n);
  }
  MemoryEstimate e;
  e.parts.push_back({"parameters", kModelKeys, parameter_bytes});
  e.parts.push_back({"gradients", kModelKeys, parameter_bytes});
  // §4: Adam keeps two fp32 moments (sharded over the ranks), NorMuon one fp32 momentum per bank element.
  e.parts.push_back({"optimizer state", kModelKeys,
                     saturating_add(saturating_mul(adam_elements, 8) / w, saturating_mul(bank_elements, 4))});
  // §1.3: one microbatch is one slice of T = batch_tokens / slices_per_call tokens. Kept at once: per layer at
  // least the attention and MLP inputs and outputs (4·d + mlp_hidden values a token), and the fp32 logits.
  int64_t slice_tokens = 0;
  for (const StageConfig& stage : recipe.schedule.stages) {
    slice_tokens = std::max(slice_tokens, stage.batch_tokens / std::max<int64_t>(1, recipe.slices_per_call));
  }
  const int64_t per_token = saturating_add(
      saturating_mul(saturating_mul(dims.num_layers, saturating_add(4 * dims.model_dim, dims.mlp_hidden)), value_bytes),
      saturating_mul(dims.vocab, 4));
  e.parts.push_back({"activations of one microbatch",
                     "schedule.stages.N.batch_tokens / slices_per_call, model.model_dim, model.mlp_hidden, "
                     "model.vocab_size",
                     saturating_mul(slice_tokens, per_token)});
  if (recipe.extensions.ngram_rows > 0) {
    // §S.2: each rank owns rows/W rows of d values and their fp32 second moment; at W > 1 also its row cache.
    const int64_t owned = recipe.extensions.ngram_rows / w;
    int64_t bytes = saturating_mul(owned, saturating_add(saturating_mul(dims.model_dim, value_bytes), 4));
    if (w > 1)
      bytes = saturating_add(bytes, saturating_mul(recipe.extensions.ngram_cache_rows, dims.model_dim * value_bytes));
    e.parts.push_back({"n-gram table", "extensions.ngram_rows, extensions.ngram_cache_rows, model.model_dim", bytes});
  }
  return e;
}

std::optional<MemoryBudget> memory_budget(Device device) {
  if (device == Device::cuda) {
    const auto free = cuda_free_memory_bytes();
    if (!free) return std::nullopt;
    // Blocks the caching allocator holds unused are this process's to hand out again (a bench's earlier rows).
    const MemoryStats pool = memory_stats(Device::cuda);
    const auto cached = static_cast<int64_t>(pool.reserved - pool.allocated);
    if (cached == 0) return MemoryBudget{*free, "the CUDA device's free memory"};
    return MemoryBudget{*free + cached, "the CUDA device's free memory and the allocator's unused cached blocks"};
  }
  std::optional<MemoryBudget> budget;
  if (const auto available = proc_kib_field("/proc/meminfo", "MemAvailable")) {
    budget = MemoryBudget{*available, "the machine's available memory (MemAvailable)"};
  }
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    const int64_t mapped = proc_kib_field("/proc/self/status", "VmSize").value_or(0);
    const int64_t cap = static_cast<int64_t>(std::min<rlim_t>(limit.rlim_cur, INT64_MAX));
    const int64_t left = std::max<int64_t>(0, cap - mapped);
    if (!budget || left < budget->bytes) {
      budget = MemoryBudget{left, "the address-space limit RLIMIT_AS (ulimit -v) of " + format_bytes(cap) +
                                      ", less the " + format_bytes(mapped) + " this process already maps"};
    }
  }
  return budget;
}

void check_memory_fits(const MemoryEstimate& estimate, const std::optional<MemoryBudget>& budget) {
  if (!budget || estimate.total() <= budget->bytes) return;
  GPT_FAIL("the run needs at least an estimated ", format_bytes(estimate.total()), " but ", budget->source,
           " offers only ", format_bytes(budget->bytes), ": ", estimate.breakdown(),
           "; make the recipe smaller (--set KEY=VALUE on the keys named), spread it over more ranks (--ranks N or "
           "--gpus N), or raise the limit");
}

std::string out_of_memory_context(const std::string& activity, const MemoryEstimate& estimate,
                                  const std::optional<MemoryBudget>& budget) {
  std::string text = "out of memory while " + activity + " (the run needs at least an estimated " +
                     format_bytes(estimate.total()) + ": " + estimate.breakdown();
  if (budget) text += "; " + budget->source + " offered " + format_bytes(budget->bytes) + " at the start";
  return text + ")";
}

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const std::bad_alloc*>(&e) != nullptr) return true;
  const std::string what = e.what();
  return what.find("cudaErrorMemoryAllocation") != std::string::npos || what.find("out of memory") != std::string::npos;
}

std::string format_bytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return text;
}

RunMemory::RunMemory(const Recipe& recipe, Device device, int world_size, bool check_fits)
    : estimate_(estimate_run_memory(recipe, device, world_size)), budget_(memory_budget(device)) {
  if (check_fits) check_memory_fits(estimate_, budget_);
}

void RunMemory::allocating(const std::string& what, const std::function<void()>& allocate) const {
  try {
    allocate();
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    GPT_FAIL(out_of_memory_context(what, estimate_, budget_), ": ", e.what());
  }
}

std::string RunMemory::failure_message(const std::exception& e) const {
  if (!is_out_of_memory(e)) return e.what();
  return out_of_memory_context(activity_, estimate_, budget_) + ": " + e.what();
}

}  // namespace gpt
