// Out of memory: a recipe too large for the machine is refused before anything is allocated, with an error naming
// the recipe keys and what limits the memory; an allocation that fails during the run says what was being done and
// how large the run is (it was a bare `std::bad_alloc`).
#include "trainer/run/memory_estimate.h"

#include <sys/resource.h>

#include <fstream>
#include <iostream>
#include <new>
#include <stdexcept>

#include <gtest/gtest.h>

#include "base/check.h"
#include "tests/common/standin_model.h"
#include "tests/run/run_test_util.h"
#include "trainer/model/weights.h"
#include "trainer/gpt/gpt_trainable.h"

namespace gpt {
namespace {

// The 8192-wide `tiny` of the report (head_dim 16 kept: 512 heads).
const std::vector<std::string> kWide = {"model.model_dim=8192", "model.num_heads=512"};

int64_t mapped_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) * 1024;
  }
  return 0;
}

// Lowers this process's address-space limit to what it maps now plus `headroom` (in a death-test child only).
void limit_address_space(int64_t headroom) {
  const rlimit limit{static_cast<rlim_t>(mapped_bytes() + headroom), static_cast<rlim_t>(mapped_bytes() + headroom)};
  if (::setrlimit(RLIMIT_AS, &limit) != 0) std::_Exit(3);
}

TEST(MemoryEstimate, ParametersAndGradientsFollowTheParameterTable) {
  const Recipe tiny = load_recipe("tiny");
  const MemoryEstimate cpu = estimate_run_memory(tiny, Device::cpu, 1);
  const int64_t count = total_parameter_count(model_dims(tiny.model, 1));
  ASSERT_NE(cpu.part("parameters"), nullptr);
  EXPECT_EQ(cpu.part("parameters")->bytes, 4 * count);  // f32 on the CPU (§R.1)
  EXPECT_EQ(cpu.part("gradients")->bytes, 4 * count);
  EXPECT_EQ(cpu.part("n-gram table"), nullptr);
  EXPECT_NE(cpu.part("parameters")->keys.find("model.model_dim"), std::string::npos);
  // bf16 on CUDA: smaller, never larger.
  EXPECT_LT(estimate_run_memory(tiny, Device::cuda, 1).part("parameters")->bytes, 4 * count);
  // The §S.2 table is counted where the recipe has one, and shrinks with the ranks that share it.
  const Recipe seed = load_recipe("tiny-ext");
  ASSERT_NE(estimate_run_memory(seed, Device::cpu, 1).part("n-gram table"), nullptr);
  EXPECT_GT(estimate_run_memory(tiny, Device::cpu, 1).total(), 0);
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(int64_t{3} << 30), "3.0 GiB");
}

TEST(MemoryEstimate, WideRecipeIsRefusedNamingItsKeysAndTheLimit) {
  const MemoryEstimate wide = estimate_run_memory(load_recipe("tiny", kWide), Device::cpu, 1);
  EXPECT_GT(wide.total(), int64_t{16} << 30);  // the qk bank alone: 60 × 8192² fp32
  try {
    check_memory_fits(wide, MemoryBudget{int64_t{1} << 30, "a budget of the test"});
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("the run needs at least an estimated "), std::string::npos) << msg;
    EXPECT_NE(msg.find("a budget of the test offers only 1.0 GiB"), std::string::npos) << msg;
    EXPECT_NE(msg.find("parameters "), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.model_dim"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--set KEY=VALUE"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(check_memory_fits(wide, std::nullopt));
  EXPECT_NO_THROW(check_memory_fits(estimate_run_memory(load_recipe("tiny"), Device::cpu, 1),
                                    MemoryBudget{int64_t{64} << 30, "64 GiB"}));
}

// The reproduction of the report: the 8192-wide recipe under a small `ulimit -v`. The old trainer went on to
// allocate and died of std::bad_alloc (under the sanitizers: an allocator report and abort); now the run is
// refused before its first tensor, naming RLIMIT_AS and the keys.
TEST(MemoryEstimateDeathTest, WideRunUnderASmallAddressSpaceLimitIsRefusedBeforeAllocating) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  test::RunScratch scratch;
  RunOptions options = test::short_run(scratch, "wide");  // the GPT, whose memory the estimate describes
  for (const std::string& o : kWide) options.overrides.push_back(o);
  EXPECT_EXIT(
      {
        limit_address_space(int64_t{512} << 20);
        try {
          TrainingRun run(options);
          std::cerr << "no refusal";
        } catch (const std::exception& e) {
          std::cerr << e.what();
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0),
      "the run needs at least an estimated .* but the address-space limit RLIMIT_AS \\(ulimit -v\\) .* offers only "
      ".*model\\.model_dim");
}

// A stand-in model that runs out of memory at its third microbatch (training step 2 without warmup).
class OutOfMemoryAtThirdMicrobatch final : public TrainableModel {
 public:
  explicit OutOfMemoryAtThirdMicrobatch(uint64_t seed) : inner_(StandinDims{}, seed) {}
  std::string description() const override { return inner_.description(); }
  ParameterSet& parameters() override { return inner_.parameters(); }
  std::vector<NamedTensor> buffers() override { return inner_.buffers(); }
  void set_schedule(const StepSchedule& s) override { inner_.set_schedule(s); }
  double train_microbatch(const Microbatch& batch, double loss_scale) override {
    if (++calls_ == 3) throw std::bad_alloc();
    return inner_.train_microbatch(batch, loss_scale);
  }
  double validation_loss(const Microbatch& window) override { return inner_.validation_loss(window); }

 private:
  StandinModel inner_;
  int calls_ = 0;
};

TEST(MemoryEstimate, BadAllocDuringTheRunSaysWhatAndHowLarge) {
  test::RunScratch scratch;
  RunOptions options = test::short_run(scratch, "oom");
  options.overrides.push_back("schedule.warmup=false");
  TrainingRun run = test::standin_run(options, [](const Recipe&, const RunOptions& o, Comm&) {
    return std::make_unique<OutOfMemoryAtThirdMicrobatch>(o.seed);
  });
  const RunResult result = run.run();
  EXPECT_EQ(result.status, RunStatus::failed);
  EXPECT_NE(result.error.find("out of memory while training at step 2 (the run needs at least an estimated "),
            std::string::npos)
      << result.error;
  EXPECT_NE(result.error.find("parameters "), std::string::npos) << result.error;
  EXPECT_NE(result.error.find("std::bad_alloc"), std::string::npos) << result.error;
}

TEST(MemoryEstimate, BadAllocWhileBuildingTheModelSaysWhatAndHowLarge) {
  test::RunScratch scratch;
  std::string msg;
  try {
    TrainingRun run = test::standin_run(
        test::short_run(scratch, "oom"),
        [](const Recipe&, const RunOptions&, Comm&) -> std::unique_ptr<TrainableModel> { throw std::bad_alloc(); });
  } catch (const Error& e) {
    msg = e.what();
  } catch (const std::exception& e) {
    msg = std::string("not a gpt::Error: ") + e.what();
  }
  EXPECT_NE(msg.find("out of memory while allocating the parameters, gradients and optimizer state (the run needs "
                     "at least an estimated "),
            std::string::npos)
      << msg;
  EXPECT_TRUE(is_out_of_memory(std::bad_alloc()));
  EXPECT_TRUE(is_out_of_memory(Error("CUDA error cudaErrorMemoryAllocation at tensor.cu")));
  EXPECT_FALSE(is_out_of_memory(Error("recipe x: key 'y' must be an integer")));
}

// RunMemory (the run's accounting): an allocation failure gets the context of the activity it interrupted, any
// other failure keeps its own message.
TEST(MemoryEstimate, RunMemoryNamesTheActivityOfAnAllocationFailureOnly) {
  RunMemory memory(load_recipe("tiny"), Device::cpu, 1, /*check_fits=*/true);
  const std::string start = memory.failure_message(std::bad_alloc());
  EXPECT_EQ(start.rfind("out of memory while starting the run (the run needs at least an estimated ", 0), 0u) << start;
  memory.set_activity("training at step 7");
  const std::string during = memory.failure_message(std::bad_alloc());
  EXPECT_EQ(during.rfind("out of memory while training at step 7 (the run needs at least an estimated ", 0), 0u)
      << during;
  EXPECT_NE(during.find("parameters "), std::string::npos) << during;  // the estimate's breakdown
  EXPECT_EQ(memory.failure_message(Error("recipe x: key 'y' must be an integer")),
            "recipe x: key 'y' must be an integer");

  std::string built;
  try {
    memory.allocating("building the test's tensors", [] { throw std::bad_alloc(); });
  } catch (const Error& e) {
    built = e.what();
  }
  EXPECT_NE(built.find("out of memory while building the test's tensors (the run needs at least an estimated "),
            std::string::npos)
      << built;
  EXPECT_THROW(memory.allocating("x", [] { throw std::runtime_error("not memory"); }), std::runtime_error);
  bool ran = false;
  memory.allocating("x", [&] { ran = true; });
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace gpt
