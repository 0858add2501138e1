#pragma once
// Helpers of the run-loop tests: a scratch directory with a small synthetic corpus (RECIPE §R.1 generator) and
// options for a short `tiny` run on the stand-in model (tests/common/standin_model.h), in-process (standin_run) or
// through bin/standin_train_gpt, train_gpt's program with that model (short_run_args).
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "tests/common/standin_model.h"
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

// The validation losses of a run, in step order (what two runs that must agree are compared by).
inline std::vector<double> val_losses(const RunResult& r) {
  std::vector<double> out;
  for (const ValPoint& p : r.val_history) out.push_back(p.val_loss);
  return out;
}

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
  o.data_dir = scratch.data();
  o.seed = 7;
  o.run_id = run_id;
  o.out_dir = scratch.out();
  o.echo = false;
  take_debug_switches(o);
  return o;
}

// The run of `options` on the stand-in model, or on a model of `factory` built around it (a test's wrapper); the GPT's
// memory estimate does not describe either, so the run skips its check.
inline TrainingRun standin_run(RunOptions options, ModelFactory factory = make_standin_model) {
  return TrainingRun(std::move(options), std::move(factory), MemoryFitCheck::skip);
}

// A built program's exit code and standard error.
struct Outcome {
  int exit_code = -1;
  std::string stderr_text;
};

// Runs build*/bin/PROGRAM ARGS in the scratch folder's shell with a time limit (a blocking open of a FIFO would
// otherwise hang the suite); stdout and stderr go to files in the scratch root.
inline Outcome run_program(const RunScratch& scratch, const std::string& program, const std::string& args,
                           int limit_seconds = 300) {
  const auto err = scratch.root() / "stderr.txt";
  const std::string cmd = "timeout " + std::to_string(limit_seconds) + " " + std::string(SPEEDRUN_BINARY_DIR "/bin/") +
                          program + " " + args + " > " + (scratch.root() / "stdout.txt").string() + " 2> " +
                          err.string();
  const int status = std::system(cmd.c_str());
  Outcome o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err);
  o.stderr_text.assign(std::istreambuf_iterator<char>(in), {});
  return o;
}

// The arguments of standin_train_gpt (train_gpt's command line) for the short stand-in run of short_schedule() on
// the scratch corpus.
inline std::string short_run_args(const RunScratch& scratch, const std::string& run_id) {
  std::string args = "--recipe tiny --data " + scratch.data().string() + " --seed 3 --run-id " + run_id + " --out " +
                     scratch.out().string() + " --backend cpu --threads 1";
  for (const std::string& o : short_schedule()) args += " --set " + o;
  return args;
}

}  // namespace gpt::test
