#include "trainer/run/training_run.h"

#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_test_util.h"
#include "tests/common/standin_model.h"
#include "trainer/data/synthetic.h"
#include "trainer/run/checkpoint.h"
#include "trainer/run/training_state.h"

namespace gpt {
namespace {

using test::RunScratch;
using test::short_run;
using test::standin_run;
using test::val_losses;

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(TrainingRun, WarmupChangesStateAndResetRestoresItBitwise) {
  RunScratch scratch;
  std::vector<NamedTensor> initial;
  std::string warmup_difference, reset_difference = "(not called)";
  RunHooks hooks;
  hooks.initial = [&](const std::vector<NamedTensor>& s) { initial = clone_state(s); };
  hooks.after_warmup = [&](const std::vector<NamedTensor>& s) { warmup_difference = first_difference(initial, s); };
  hooks.after_reset = [&](const std::vector<NamedTensor>& s) { reset_difference = first_difference(initial, s); };
  TrainingRun run = standin_run(short_run(scratch, "reset"));
  const RunResult r = run.run(hooks);
  ASSERT_EQ(r.status, RunStatus::finished) << r.error;
  EXPECT_FALSE(warmup_difference.empty()) << "warmup should have trained";
  EXPECT_EQ(reset_difference, "") << "first tensor differing from the initial state after the reset";
  // The initial state holds the tied embedding and all-zero optimizer state.
  bool saw_optimizer_state = false;
  for (const NamedTensor& t : initial) {
    if (t.name.rfind("adam/", 0) == 0 || t.name.rfind("bank/", 0) == 0) {
      saw_optimizer_state = true;
      for (double v : t.tensor.to_doubles()) ASSERT_EQ(v, 0.0) << t.name;
    }
  }
  EXPECT_TRUE(saw_optimizer_state);
}

TEST(TrainingRun, WarmupOffSkipsWarmupAndItsReset) {
  RunScratch scratch;
  bool warmed_up = false, reset = false;
  RunHooks hooks;
  hooks.after_warmup = [&](const std::vector<NamedTensor>&) { warmed_up = true; };
  hooks.after_reset = [&](const std::vector<NamedTensor>&) { reset = true; };
  RunOptions options = short_run(scratch, "no_warmup");
  options.overrides.push_back("schedule.warmup=false");
  const RunResult r = standin_run(options).run(hooks);
  ASSERT_EQ(r.status, RunStatus::finished) << r.error;
  EXPECT_FALSE(warmed_up);
  EXPECT_FALSE(reset);
  std::ifstream log(scratch.out() / "no_warmup.txt");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("Warmup skipped (schedule.warmup = false)"), std::string::npos);
  EXPECT_EQ(text.find("Resetting Model"), std::string::npos);
}

TEST(TrainingRun, SameSeedGivesIdenticalLossesAndLossFalls) {
  RunScratch scratch;
  const RunResult a = standin_run(short_run(scratch, "a")).run();
  const RunResult b = standin_run(short_run(scratch, "b")).run();
  ASSERT_EQ(a.status, RunStatus::finished) << a.error;
  ASSERT_EQ(b.status, RunStatus::finished) << b.error;
  EXPECT_EQ(a.train_losses, b.train_losses);
  EXPECT_EQ(val_losses(a), val_losses(b));
  ASSERT_EQ(a.val_history.size(), 3u);  // steps 0, 4, 8
  EXPECT_EQ(a.val_history[0].step, 0);
  EXPECT_EQ(a.val_history[1].step, 4);
  EXPECT_EQ(a.val_history[2].step, 8);
  ASSERT_TRUE(a.final_val_loss.has_value());
  EXPECT_EQ(*a.final_val_loss, a.val_history.back().val_loss);
  EXPECT_LT(*a.final_val_loss, a.val_history.front().val_loss - 0.1);
  EXPECT_EQ(a.steps, 8);
  EXPECT_EQ(a.total_steps, 8);
  EXPECT_EQ(a.train_losses.size(), 8u);
  // tokens = Σ B over the steps: stages of 2 steps at 512, 1024, 1536 and 2 extension steps at 1536.
  EXPECT_EQ(a.tokens, 2 * 512 + 2 * 1024 + 2 * 1536 + 2 * 1536);

  RunOptions other = short_run(scratch, "c");
  other.seed = 8;
  const RunResult c = standin_run(other).run();
  EXPECT_NE(val_losses(a), val_losses(c));
}

TEST(TrainingRun, WritesLogAndSummary) {
  RunScratch scratch;
  const RunResult r = standin_run(short_run(scratch, "logged")).run();
  ASSERT_EQ(r.status, RunStatus::finished) << r.error;
  const nlohmann::json j = read_json(scratch.out() / "logged.json");
  EXPECT_EQ(j.at("schema_version"), 1);
  EXPECT_EQ(j.at("run_id"), "logged");
  EXPECT_EQ(j.at("seed"), 7);
  EXPECT_EQ(j.at("recipe").at("name"), "tiny");
  EXPECT_EQ(j.at("recipe").at("hash").get<std::string>().size(), 16u);
  EXPECT_EQ(j.at("status"), "finished");
  EXPECT_EQ(j.at("final_val_loss").get<double>(), *r.final_val_loss);
  EXPECT_EQ(j.at("steps"), 8);
  EXPECT_EQ(j.at("total_steps"), 8);
  EXPECT_EQ(j.at("tokens"), r.tokens);
  EXPECT_EQ(j.at("val_history").size(), 3u);
  EXPECT_EQ(j.at("val_history")[2].at("step"), 8);
  EXPECT_GT(j.at("peak_memory").at("allocated_mib").get<int64_t>(), 0);
  EXPECT_GT(j.at("peak_memory").at("reserved_mib").get<int64_t>(), 0);
  // Stages of the 8-step schedule: 0-1, 2-3, 4-5, extension 6-7; their times add up to the steps' time.
  const nlohmann::json& stages = j.at("stage_times");
  ASSERT_EQ(stages.size(), 4u);
  double stage_sum = 0;
  for (size_t k = 0; k < stages.size(); ++k) {
    EXPECT_EQ(stages[k].at("stage"), static_cast<int>(k));
    EXPECT_EQ(stages[k].at("first_step"), static_cast<int>(2 * k));
    EXPECT_EQ(stages[k].at("steps"), 2);
    EXPECT_DOUBLE_EQ(stages[k].at("ms_per_step").get<double>(), stages[k].at("train_time_ms").get<double>() / 2);
    stage_sum += stages[k].at("train_time_ms").get<double>();
  }
  EXPECT_GT(stage_sum, 0);
  EXPECT_LE(stage_sum, r.train_time_ms);
  EXPECT_EQ(j.at("world_size"), 1);
  EXPECT_EQ(j.at("backend"), "cpu");
  EXPECT_TRUE(j.contains("git_commit"));
  EXPECT_TRUE(j.at("environment").contains("hostname"));
  EXPECT_FALSE(j.contains("error"));

  std::ifstream log(scratch.out() / "logged.txt");
  std::vector<std::string> lines;
  for (std::string line; std::getline(log, line);) lines.push_back(line);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.front(), "run_id: logged seed: 7");
  EXPECT_NE(std::find(lines.begin(), lines.end(), "Resetting Model"), lines.end());
  int training_lines = 0, validation_lines = 0;
  for (const std::string& line : lines) {
    if (line.rfind("step:", 0) != 0) continue;
    (line.find("val_loss:") != std::string::npos ? validation_lines : training_lines)++;
  }
  EXPECT_EQ(training_lines, 8);
  EXPECT_EQ(validation_lines, 3);
  EXPECT_EQ(lines.back().rfind("peak memory allocated: ", 0), 0u) << lines.back();
}

// Validation forwards sleep; the reported training time must not include them (clock stopped, §9.2).
class SlowValidationModel final : public TrainableModel {
 public:
  explicit SlowValidationModel(uint64_t seed) : inner_(StandinDims{}, seed) {}
  std::string description() const override { return inner_.description(); }
  ParameterSet& parameters() override { return inner_.parameters(); }
  std::vector<NamedTensor> buffers() override { return inner_.buffers(); }
  void set_schedule(const StepSchedule& s) override { inner_.set_schedule(s); }
  double train_microbatch(const Microbatch& b, double scale) override { return inner_.train_microbatch(b, scale); }
  double validation_loss(const Microbatch& w) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return inner_.validation_loss(w);
  }

 private:
  StandinModel inner_;
};

TEST(TrainingRun, ClockStopsDuringValidation) {
  RunScratch scratch;
  auto factory = [](const Recipe&, const RunOptions& o, Comm&) {
    return std::make_unique<SlowValidationModel>(o.seed);
  };
  const auto begin = std::chrono::steady_clock::now();
  const RunResult r = standin_run(short_run(scratch, "slow"), factory).run();
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  ASSERT_EQ(r.status, RunStatus::finished) << r.error;
  // 3 validations × 2 windows × 100 ms = 600 ms of validation in the timed region, none of it on the clock.
  EXPECT_GT(wall_ms, 600.0);
  EXPECT_LT(r.train_time_ms, wall_ms - 600.0);
  EXPECT_GT(r.train_time_ms, 0.0);
  for (size_t i = 1; i < r.val_history.size(); ++i) {
    EXPECT_GE(r.val_history[i].train_time_ms, r.val_history[i - 1].train_time_ms);
  }
}

// The short stand-in run with one NaN written into lm_head before step `step` (debug.inject_nan_step).
RunResult run_poisoned_at(const RunScratch& scratch, const std::string& run_id, int64_t step) {
  RunOptions o = short_run(scratch, run_id);
  o.inject_nan_step = step;
  return standin_run(o).run();
}

TEST(TrainingRun, InjectedNanDivergesWithSummary) {
  RunScratch scratch;
  const RunResult r = run_poisoned_at(scratch, "nan", 2);
  EXPECT_EQ(r.status, RunStatus::diverged);
  EXPECT_EQ(exit_code(r.status), 3);
  EXPECT_EQ(r.steps, 2);
  EXPECT_FALSE(r.final_val_loss.has_value());
  const nlohmann::json j = read_json(scratch.out() / "nan.json");
  EXPECT_EQ(j.at("status"), "diverged");
  EXPECT_TRUE(j.at("final_val_loss").is_null());
  EXPECT_EQ(j.at("steps"), 2);
  EXPECT_NE(j.at("error").get<std::string>().find("step 2"), std::string::npos);
  // The error names where the poison is: lm_head's value (debug.inject_nan_step writes one NaN there).
  const std::string state = r.error.substr(r.error.find("; ") + 2);
  EXPECT_TRUE(state.starts_with("non-finite state: param 1 of ")) << r.error;
  EXPECT_NE(state.find(" (lm_head)"), std::string::npos) << r.error;
}

// Poisoned before the final validation (debug.inject_nan_step = the step count): every step trained, the loss of
// each validation window is NaN, and the error names the windows and where the NaN lives.
TEST(TrainingRun, InjectedNanBeforeTheFinalValidationNamesItsWindows) {
  RunScratch scratch;
  const RunResult r = run_poisoned_at(scratch, "nan_val", 8);
  EXPECT_EQ(r.status, RunStatus::diverged);
  EXPECT_EQ(r.steps, 8);
  EXPECT_FALSE(r.final_val_loss.has_value());
  EXPECT_TRUE(
      r.error.starts_with("non-finite validation loss at step 8 (validation windows 0, 1 of 2); "
                          "non-finite state: param 1 of "))
      << r.error;
  EXPECT_NE(r.error.find(" (lm_head)"), std::string::npos) << r.error;
}

TEST(TrainingRun, InjectedNanPastTheLastStepIsRefused) {
  RunScratch scratch;
  std::string message;
  try {
    message = run_poisoned_at(scratch, "nan_late", 9).error;
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("debug.inject_nan_step=9: the recipe has only 8 steps"), std::string::npos) << message;
}

TEST(TrainingRun, ResumeContinuesBitIdentically) {
  RunScratch scratch;
  RunOptions straight = short_run(scratch, "straight");
  straight.checkpoint_every = 3;
  straight.final_checkpoint = true;
  const RunResult a = standin_run(straight).run();
  ASSERT_EQ(a.status, RunStatus::finished) << a.error;
  const auto checkpoint = scratch.out() / "straight.step000003.ckpt";
  ASSERT_TRUE(std::filesystem::exists(checkpoint));
  ASSERT_TRUE(std::filesystem::exists(scratch.out() / "straight.step000006.ckpt"));

  RunOptions resumed = short_run(scratch, "resumed");
  resumed.resume = checkpoint;
  resumed.final_checkpoint = true;
  const RunResult b = standin_run(resumed).run();
  ASSERT_EQ(b.status, RunStatus::finished) << b.error;

  // Losses of steps 3..7 and every validation (the resumed run carries the earlier ones over) are identical.
  ASSERT_EQ(b.train_losses.size(), 5u);
  EXPECT_EQ(std::vector<double>(a.train_losses.begin() + 3, a.train_losses.end()), b.train_losses);
  EXPECT_EQ(val_losses(a), val_losses(b));
  EXPECT_EQ(b.steps, 8);
  EXPECT_EQ(b.tokens, a.tokens);

  // The final states (weights, buffers, optimizer state incl. counters) are bitwise equal.
  const CheckpointData fa = read_checkpoint(scratch.out() / "straight.final.ckpt");
  const CheckpointData fb = read_checkpoint(scratch.out() / "resumed.final.ckpt");
  EXPECT_EQ(first_difference(fa.tensors, fb.tensors), "");
  EXPECT_EQ(fa.meta.at("optimizer"), fb.meta.at("optimizer"));
  EXPECT_EQ(fa.meta.at("loader"), fb.meta.at("loader"));
  EXPECT_EQ(fa.meta.at("optimizer").at("tied"), false);  // the split (step 5) happened before the end

  // The resumed log continues the run: it appends and says where it resumed.
  std::ifstream log(scratch.out() / "resumed.txt");
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(text.find("Resuming from"), std::string::npos);
  EXPECT_EQ(text.find("step:3/8 train_time"), std::string::npos);
  EXPECT_NE(text.find("step:4/8 train_time"), std::string::npos);
}

void expect_input_error(const RunOptions& o, const std::string& fragment) {
  try {
    TrainingRun run = standin_run(o);
    FAIL() << "expected an input error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(TrainingRun, ResumeRejectsAnotherRecipeOrSeed) {
  RunScratch scratch;
  RunOptions straight = short_run(scratch, "base");
  straight.checkpoint_every = 4;
  ASSERT_EQ(standin_run(straight).run().status, RunStatus::finished);
  RunOptions other = short_run(scratch, "other");
  other.resume = scratch.out() / "base.step000004.ckpt";
  other.overrides.push_back("optimizer.adam_lr=0.01");
  expect_input_error(other, "hash");
  RunOptions seed = short_run(scratch, "seed");
  seed.resume = scratch.out() / "base.step000004.ckpt";
  seed.seed = 99;
  expect_input_error(seed, "--seed");
}

// A checkpoint records the corpus it trained on (shard names, sizes, token counts): resuming it on another corpus
// would mix two corpora in one validation history, so it is refused with one line naming both.
TEST(TrainingRun, ResumeRejectsAnotherCorpusNamingBoth) {
  RunScratch scratch;
  RunOptions straight = short_run(scratch, "base");
  straight.checkpoint_every = 4;
  ASSERT_EQ(standin_run(straight).run().status, RunStatus::finished);
  SyntheticCorpusOptions other_corpus;
  other_corpus.seed = 99;
  other_corpus.train_tokens = 150'000;
  other_corpus.val_tokens = 20'000;
  write_synthetic_corpus(scratch.root() / "other-data", other_corpus);
  RunOptions other = short_run(scratch, "other");
  other.resume = scratch.out() / "base.step000004.ckpt";
  other.data_dir = scratch.root() / "other-data";
  try {
    TrainingRun run = standin_run(other);
    FAIL() << "expected --resume on another corpus to be refused";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("trained on '" + scratch.data().string() + "'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("this run's --data is '" + other.data_dir.string() + "'"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  RunOptions same = short_run(scratch, "same");  // the same corpus still resumes
  same.resume = scratch.out() / "base.step000004.ckpt";
  EXPECT_EQ(standin_run(same).run().status, RunStatus::finished);
}

TEST(TrainingRun, BadInputsNameTheCulprit) {
  RunScratch scratch;
  RunOptions o = short_run(scratch, "bad");
  {
    RunOptions b = o;
    b.data_dir = scratch.root() / "missing";
    expect_input_error(b, "--data");
  }
  {
    RunOptions b = o;
    b.recipe = "no_such_recipe";
    expect_input_error(b, "no_such_recipe");
  }
  {
    RunOptions b = o;
    b.overrides.push_back("model.no_such_key=1");
    expect_input_error(b, "no_such_key");
  }
  {
    RunOptions b = o;
    b.gpus = 2;
    expect_input_error(b, "--gpus");
  }
  {
    RunOptions b = o;
    b.backend = "tpu";
    expect_input_error(b, "--backend");
  }
  {
    RunOptions b = o;
    b.run_id = "a/b";
    expect_input_error(b, "--run-id");
  }
  {
    RunOptions b = o;
    b.resume = scratch.root() / "missing.ckpt";
    expect_input_error(b, "missing.ckpt");
  }
  {
    const auto empty = scratch.root() / "empty";
    std::filesystem::create_directories(empty);
    RunOptions b = o;
    b.data_dir = empty;
    expect_input_error(b, empty.string());
  }
}

TEST(DebugSwitches, AreTakenOutOfTheRecipeOverrides) {
  RunOptions o;
  o.overrides = {"schedule.num_extension=2", "debug.inject_nan_step=4", "debug.final_checkpoint=true"};
  take_debug_switches(o);
  EXPECT_EQ(o.overrides, std::vector<std::string>{"schedule.num_extension=2"});
  EXPECT_EQ(o.inject_nan_step, 4);
  EXPECT_TRUE(o.final_checkpoint);
  for (const char* bad : {"debug.inject_nan_step=x", "debug.inject_nan_step=-1", "debug.model=big", "debug.nope=1",
                          "debug.final_checkpoint=yes", "debug.model"}) {
    RunOptions b;
    b.overrides = {bad};
    EXPECT_THROW(take_debug_switches(b), Error) << bad;
  }
  // The product has no model switch: the stand-in is a test fixture (bin/standin_train_gpt, tests/programs/).
  RunOptions standin;
  standin.overrides = {"debug.model=standin"};
  try {
    take_debug_switches(standin);
    FAIL() << "debug.model=standin was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown debug switch 'debug.model'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gpt
