#pragma once
// Helpers of the run-loop tests: a scratch directory with a small synthetic corpus (RECIPE §R.1 generator) and
// options for a short `tiny` run on the stand-in model.
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "trainer/data/synthetic.h"
#include "trainer/run/training_run.h"

namespace gpt::test {

class RunScratch {
 public:
  RunScratch() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "gpt_run_";
    if (info != nullptr) name += std::string(info->test_suite_name()) + "_" + info->name();
    name += "_" + std::to_string(std::random_device{}());
    root_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
    SyntheticCorpusOptions corpus;
    corpus.train_tokens = 200'000;
    corpus.val_tokens = 20'000;
    write_synthetic_corpus(data(), corpus);
  }
  RunScratch(const RunScratch&) = delete;
  RunScratch& operator=(const RunScratch&) = delete;
  ~RunScratch() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  std::filesystem::path data() const { return root_ / "data"; }
  std::filesystem::path out() const { return root_ / "out"; }
  const std::filesystem::path& root() const { return root_; }

 private:
  std::filesystem::path root_;
};

// A 10-step `tiny` schedule (stages 2/2/2 + 2 extension steps... validation every 4 steps) on the stand-in
// model: warmup (on, unlike `tiny`'s default), reset, split at step 5, Adam and bank steps, validations at 0, 4 and 8.
inline std::vector<std::string> short_schedule() {
  return {"schedule.num_scheduled=6", "schedule.num_extension=2", "schedule.momentum_warmup_steps=2",
          "validation.every=4", "schedule.warmup=true"};
}

inline RunOptions short_run(const RunScratch& scratch, const std::string& run_id) {
  RunOptions o;
  o.recipe = "tiny";
  o.overrides = short_schedule();
  o.overrides.push_back("debug.model=standin");
  o.data_dir = scratch.data();
  o.seed = 7;
  o.run_id = run_id;
  o.out_dir = scratch.out();
  o.echo = false;
  take_debug_switches(o);
  return o;
}

}  // namespace gpt::test
