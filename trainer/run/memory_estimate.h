#pragma once
// What a run will allocate, estimated from its recipe before anything is allocated, and what the machine offers:
// a recipe too large for the device (or, on the CPU, for the address-space limit or the available memory) is
// refused with one error naming the recipe keys that size it, instead of a bare std::bad_alloc minutes later.
// The estimate counts what must exist at once (parameters and gradients §2.2, optimizer state §4, the
// activations of one microbatch §1.3, the §S.2 n-gram table); it is a floor, so a refusal is never spurious.
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/tensor.h"
#include "trainer/recipe/recipe.h"

namespace gpt {

struct MemoryEstimate {
  struct Part {
    std::string what;  // "parameters", "activations of one microbatch", ...
    std::string keys;  // the recipe keys that size it
    int64_t bytes = 0;
  };
  std::vector<Part> parts;
  int64_t total() const;
  // "parameters 1.2 GiB (model.model_dim, ...), gradients ...".
  std::string breakdown() const;
  const Part* part(const std::string& what) const;  // nullptr when the run has no such part
};

// For one rank of a run of `world_size` ranks on `device`.
MemoryEstimate estimate_run_memory(const Recipe& recipe, Device device, int world_size);

struct MemoryBudget {
  int64_t bytes = 0;
  std::string source;  // what limits it, e.g. "the address-space limit RLIMIT_AS (ulimit -v)"
};

// CPU: the smaller of MemAvailable (/proc/meminfo) and what RLIMIT_AS leaves above the address space this process
// already maps; CUDA: the device's free memory plus the blocks the caching allocator holds unused. nullopt when nothing
// can be read (no check then).
std::optional<MemoryBudget> memory_budget(Device device);

// Throws gpt::Error when the estimate exceeds the budget: the sizes, what limits them, and the keys and flags to
// change.
void check_memory_fits(const MemoryEstimate& estimate, const std::optional<MemoryBudget>& budget);

// What to add to an out-of-memory error raised while `activity` ("building the model", "step 12"): the estimate
// and the budget, so that the error says how large the run is and what limits it.
std::string out_of_memory_context(const std::string& activity, const MemoryEstimate& estimate,
                                  const std::optional<MemoryBudget>& budget);

// Whether an exception's message is an allocation failure (std::bad_alloc, CUDA out of memory).
bool is_out_of_memory(const std::exception& e);

// 1536 -> "1.5 KiB", 3 << 30 -> "3.0 GiB".
std::string format_bytes(int64_t bytes);

// One run's memory accounting (trainer/run/training_run.cpp): this rank's estimate and the device's budget, taken
// before anything is allocated, and what the run is doing now, so that an allocation failure anywhere in the run
// names the sizes, the limit and the activity it interrupted.
class RunMemory {
 public:
  // `check_fits`: refuse the run (check_memory_fits) when the estimate exceeds the budget; the estimate describes
  // the GPT model, so a run of another model passes false.
  RunMemory(const Recipe& recipe, Device device, int world_size, bool check_fits);

  // Runs `allocate`; an allocation failure in it is rethrown as gpt::Error with the out-of-memory context of
  // `what` ("allocating the parameters, ..."). Other errors pass unchanged.
  void allocating(const std::string& what, const std::function<void()>& allocate) const;

  // What the run does from now on ("training at step 12"); "starting the run" until the first call.
  void set_activity(std::string activity) { activity_ = std::move(activity); }

  // The message of a failure of the run: an allocation failure's is preceded by the out-of-memory context of the
  // current activity, any other is e.what() as it is.
  std::string failure_message(const std::exception& e) const;

 private:
  MemoryEstimate estimate_;             // this rank's share, from the recipe
  std::optional<MemoryBudget> budget_;  // what the device offered at the start
  std::string activity_ = "starting the run";
};

}  // namespace gpt
