// The reference-check export (trainer/tools/reference_export.h) on `tiny`: every file the manifest names has the
// size its shape says and finite values, the initial weights are the seeded ones, the exported gradients and
// loss of every microbatch agree with an independent f64 forward/backward of the model, the optimizer steps have
// the even/odd semantics, a checkpoint's pair starts from its trained weights, the mutation switch changes the
// results, and `scripts/reference-check --parse-only` accepts the export. Bad flags name themselves.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/run/run_test_util.h"
#include "trainer/model/weights.h"
#include "trainer/run/checkpoint.h"
#include "trainer/gpt/gpt_trainable.h"
#include "trainer/tools/reference_export.h"

namespace gpt {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<char> read_bytes(const fs::path& path) {
  std::vector<char> bytes(static_cast<size_t>(fs::file_size(path)));
  std::ifstream in(path, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(in.good()) << path;
  return bytes;
}

size_t dtype_bytes(const std::string& dtype) {
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "bf16") return 2;
  if (dtype == "i64") return 8;
  ADD_FAILURE() << "unexpected dtype " << dtype;
  return 1;
}

// A float file's values as doubles (f32, or bf16 as the high half of an f32).
std::vector<double> read_floats(const fs::path& dir, const json& entry) {
  const std::vector<char> bytes = read_bytes(dir / entry.at("file").get<std::string>());
  std::vector<double> out;
  if (entry.at("dtype") == "f32") {
    std::vector<float> f(bytes.size() / 4);
    std::memcpy(f.data(), bytes.data(), f.size() * 4);
    out.assign(f.begin(), f.end());
  } else {
    out.resize(bytes.size() / 2);
    for (size_t i = 0; i < out.size(); ++i) {
      uint32_t u = 0;
      std::memcpy(reinterpret_cast<char*>(&u) + 2, bytes.data() + 2 * i, 2);
      float f;
      std::memcpy(&f, &u, 4);
      out[i] = f;
    }
  }
  return out;
}

template <typename T>
std::vector<T> read_ints(const fs::path& dir, const json& entry) {
  const std::vector<char> bytes = read_bytes(dir / entry.at("file").get<std::string>());
  std::vector<T> out(bytes.size() / sizeof(T));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

// Every tensor entry of the manifest (objects with a "file" key), wherever it sits.
void collect_entries(const json& node, std::vector<json>& out) {
  if (node.is_object()) {
    if (node.contains("file")) out.push_back(node);
    for (const auto& [key, value] : node.items()) collect_entries(value, out);
  } else if (node.is_array()) {
    for (const json& value : node) collect_entries(value, out);
  }
}

const json& by_name(const json& list, const std::string& name) {
  for (const json& e : list)
    if (e.at("name") == name) return e;
  throw std::runtime_error("no entry named " + name);
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

ReferenceExportOptions tiny_export(const test::RunScratch& scratch) {
  ReferenceExportOptions o;
  o.run.recipe = "tiny";
  o.run.overrides = {"model.bigram_rows=4096"};  // smaller files; the bigram path is unchanged
  o.run.data_dir = scratch.data();
  o.run.seed = 5;
  o.run.out_dir = scratch.out();
  o.validation_tokens = 64;
  o.steps = {8};  // one pair keeps the test short; the default pair list is checked on its own below
  o.microbatches = 2;
  return o;
}

Microbatch read_microbatch(const fs::path& dir, const json& b) {
  Microbatch mb;
  mb.inputs = read_ints<int32_t>(dir, b.at("inputs"));
  mb.targets = read_ints<int64_t>(dir, b.at("targets"));
  mb.cu_seqlens = read_ints<int32_t>(dir, b.at("cu_seqlens"));
  mb.bigram_ids = read_ints<int32_t>(dir, b.at("bigram_ids"));
  mb.sign_rows = read_ints<int32_t>(dir, b.at("sign_rows"));
  mb.max_seqlen = b.at("max_seqlen");
  return mb;
}

TEST(ReferenceExport, TinyExportIsCompleteAndMatchesAnIndependentBackward) {
  test::RunScratch scratch;
  const ReferenceExportOptions options = tiny_export(scratch);
  const fs::path manifest_path = write_reference_export(options);
  const fs::path dir = manifest_path.parent_path();
  const json manifest = json::parse(std::ifstream(manifest_path));

  // Step 8 starts stage 1: its windows and YaRN event differ from stage 0's.
  ASSERT_EQ(manifest.at("steps").size(), 1u);
  const json& pair = manifest["steps"][0];
  EXPECT_EQ(pair["step"], 8);
  EXPECT_EQ(pair["schedule"]["ws_long_tokens"], 112);
  EXPECT_EQ(pair["schedule"]["yarn_events"].size(), 1u);
  EXPECT_EQ(pair["schedule_next"]["step"], 9);
  EXPECT_EQ(pair["weights"]["source"], "initial");
  ASSERT_EQ(pair["microbatches"].size(), 2u);
  EXPECT_EQ(pair["microbatches"][1]["after_odd"]["step"], 9);
  EXPECT_EQ(manifest["fp8"], false);
  EXPECT_FALSE(manifest.contains("mutation"));
  // Two different slices of the loader's call: two draws of every comparison.
  EXPECT_NE(read_ints<int32_t>(dir, pair["microbatches"][0]["batch"]["inputs"]),
            read_ints<int32_t>(dir, pair["microbatches"][1]["batch"]["inputs"]));

  // Every file has the size its shape and dtype say, and float files hold finite values (checked for the
  // results; the weights files are compared value by value below).
  std::vector<json> entries;
  collect_entries(manifest, entries);
  // Initial weights, per microbatch its batch (5 files), the even and the odd step's gradients, the 3 banks after
  // the even step and every parameter after the odd step, 2 buffers, validation (6).
  EXPECT_EQ(entries.size(), 19u + 2 * (5 + 19 + 19 + 3 + 19) + 2 + 6);
  EXPECT_EQ(pair["microbatches"][0]["after_even"]["unchanged"].size(), 16u);
  for (const json& e : entries) {
    int64_t numel = 1;
    for (int64_t n : e.at("shape")) numel *= n;
    const auto expected = static_cast<uintmax_t>(numel) * dtype_bytes(e.at("dtype"));
    const fs::path file = dir / e.at("file").get<std::string>();
    ASSERT_EQ(fs::file_size(file), expected) << file;
    EXPECT_EQ(e.at("bytes").get<uintmax_t>(), expected) << file;
    const bool result = e.at("file").get<std::string>().find(".grad.") != std::string::npos ||
                        e.at("file").get<std::string>().find(".val.") != std::string::npos;
    if ((e.at("dtype") == "f32" || e.at("dtype") == "bf16") && (result || numel < 100'000)) {
      for (double x : read_floats(dir, e)) ASSERT_TRUE(std::isfinite(x)) << file;
    }
  }

  // The initial weights are the seeded ones, bit for bit.
  const Recipe recipe = load_recipe("tiny", {"model.bigram_rows=4096", "fp8=false"});
  ModelWeights seeded = init_weights(model_dims(recipe.model, 1), options.run.seed, DType::f32);
  for (auto& [name, tensor] : seeded.parameters()) {
    const json& e = by_name(manifest.at("initial"), name);
    EXPECT_EQ(read_floats(dir, e), tensor->to_doubles()) << name;
    EXPECT_EQ(e.at("reference_name"), reference_state_name(name));
  }

  // An f64 model from the same seed, on the exported microbatch and prefix table, gives the exported loss and
  // gradients (the export runs in f32: agreement to f32 accuracy, relative to each gradient's largest entry).
  const Schedule schedule(recipe);
  const std::vector<int64_t> prefix = read_ints<int64_t>(dir, by_name(manifest.at("buffers"), "prefix_table"));
  for (const json& step : manifest.at("steps")) {
    const int64_t s = step.at("step");
    for (const json& draw : step.at("microbatches")) {
      GptTrainable f64_model(recipe, options.run.seed, 1, DType::f64, Device::cpu);
      f64_model.set_prefix_table(prefix);
      f64_model.set_schedule(schedule.at(s));
      const double loss = f64_model.train_microbatch(read_microbatch(dir, draw.at("batch")), 1.0);
      EXPECT_NEAR(loss, draw["train"]["loss_mean"].get<double>(), 1e-4 * loss) << "step " << s;
      // The FP8 lm_head objective is the same loss through e4m3/e5m2 operands: close, not equal.
      const double fp8 = draw["train"]["objective_fp8_lm_head"].get<double>();
      const double objective = draw["train"]["objective"].get<double>();
      EXPECT_NE(fp8, objective);
      EXPECT_NEAR(fp8, objective, 0.05 * objective);
      for (Parameter& p : f64_model.parameters().all()) {
        const std::vector<double> ours = read_floats(dir, by_name(draw.at("gradients"), p.name));
        const std::vector<double> exact = p.grad.to_doubles();
        ASSERT_EQ(ours.size(), exact.size()) << p.name;
        const double scale = max_abs(exact);
        double worst = 0;
        for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, std::abs(ours[i] - exact[i]));
        EXPECT_LE(worst, 2e-3 * scale + 1e-7)
            << "step " << s << " gradient of " << p.name << " (largest " << scale << ")";
      }

      // The odd step's optimizer reads the banks' new gradient and the Adam parameters' sum over both steps.
      const std::vector<double> even = read_floats(dir, by_name(draw.at("gradients"), "scalars"));
      const std::vector<double> odd = read_floats(dir, by_name(draw.at("gradients_odd"), "scalars"));
      EXPECT_NE(odd, even);
      double even_norm = 0, odd_norm = 0;
      for (size_t i = 0; i < even.size(); ++i) even_norm += even[i] * even[i], odd_norm += odd[i] * odd[i];
      EXPECT_GT(odd_norm, even_norm) << "an accumulated sum of two similar gradients is the larger";

      // Even step: only the banks move (Adam waits for the odd step); odd step: Adam parameters move too.
      for (const char* name : {"qk_bank", "mlp_bank"}) {
        EXPECT_NE(read_floats(dir, by_name(draw["after_even"]["tensors"], name)),
                  read_floats(dir, by_name(manifest["initial"], name)))
            << name;
      }
      // The CPU computes in fp32: no bank has a mantissa to write (the CUDA case:
      // tests/gpu/reference_export_cuda_test).
      for (const char* key : {"after_even", "after_odd"})
        for (const json& e : draw[key]["tensors"]) EXPECT_FALSE(e.contains("mantissa")) << key << " " << e["name"];
      for (const char* name : {"lm_head", "scalars", "post_lambdas"}) {
        const auto initial = read_floats(dir, by_name(manifest["initial"], name));
        const json& unchanged = draw["after_even"]["unchanged"];
        EXPECT_NE(std::find(unchanged.begin(), unchanged.end(), reference_state_name(name)), unchanged.end()) << name;
        EXPECT_NE(read_floats(dir, by_name(draw["after_odd"]["tensors"], name)), initial) << name;
      }
    }

    // The per-position validation losses average to the model's own validation loss.
    const std::vector<double> val = read_floats(dir, step.at("validation").at("losses"));
    ASSERT_EQ(static_cast<int64_t>(val.size()), 64);
    double sum = 0;
    for (double l : val) sum += l;
    EXPECT_NEAR(sum / 64.0, step["validation"]["model_mean_loss"].get<double>(), 1e-4);
  }

  // The check script's stdlib-only parsing accepts the export, and names a file cut short.
  const std::string script = std::string(SPEEDRUN_FIXTURES_DIR) + "/../../scripts/reference-check";
  const std::string quiet = " > " + (scratch.root() / "parse.txt").string() + " 2>&1";
  EXPECT_EQ(std::system(("python3 " + script + " --parse-only " + dir.string() + quiet).c_str()), 0);
  const std::string cut = manifest["steps"][0]["microbatches"][1]["gradients"][0]["file"];
  fs::resize_file(dir / cut, 3);
  EXPECT_NE(std::system(("python3 " + script + " --parse-only " + dir.string() + quiet).c_str()), 0);
  std::ifstream report(scratch.root() / "parse.txt");
  const std::string text{std::istreambuf_iterator<char>(report), {}};
  EXPECT_NE(text.find(cut), std::string::npos) << text;
}

// A checkpoint written after K steps adds the pair (K, K + 1) on its weights, read from the loader where the run
// stopped; its starting weights are written beside the pair and differ from the initial ones.
TEST(ReferenceExport, CheckpointPairStartsFromTheTrainedWeights) {
  test::RunScratch scratch;
  RunOptions trained;
  trained.recipe = "tiny";
  trained.overrides = {"model.bigram_rows=4096", "debug.stop_after_step=4"};
  trained.data_dir = scratch.data();
  trained.seed = 5;
  trained.run_id = "trained";
  trained.out_dir = scratch.root() / "trained";
  trained.echo = false;
  take_debug_switches(trained);
  TrainingRun(trained).run();
  const fs::path checkpoint = trained.out_dir / "trained.step000004.ckpt";
  ASSERT_TRUE(fs::exists(checkpoint));

  ReferenceExportOptions o = tiny_export(scratch);
  o.steps = {0};
  o.microbatches = 1;
  o.checkpoint = checkpoint;
  const fs::path dir = write_reference_export(o).parent_path();
  const json manifest = json::parse(std::ifstream(dir / "manifest.json"));
  ASSERT_EQ(manifest["steps"].size(), 2u);
  const json& pair = manifest["steps"][1];
  EXPECT_EQ(pair["step"], 4);
  EXPECT_EQ(pair["weights"]["source"], "checkpoint");
  EXPECT_EQ(pair["weights"]["trained_steps"], 4);
  ASSERT_TRUE(pair.contains("initial"));
  const CheckpointData data = read_checkpoint(checkpoint);
  for (const NamedTensor& t : data.tensors) {
    if (!t.name.starts_with("param/")) continue;
    const std::string name = t.name.substr(6);
    EXPECT_EQ(read_floats(dir, by_name(pair["initial"], name)), t.tensor.to_doubles()) << name;
  }
  EXPECT_NE(read_floats(dir, by_name(pair["initial"], "qk_bank")),
            read_floats(dir, by_name(manifest["initial"], "qk_bank")));
  // Read where the run stopped, not from the start of the train shards.
  EXPECT_NE(read_ints<int32_t>(dir, pair["microbatches"][0]["batch"]["inputs"]),
            read_ints<int32_t>(dir, manifest["steps"][0]["microbatches"][0]["batch"]["inputs"]));
}

TEST(ReferenceExport, DefaultStepsAreStepZeroAndTheFirstEvenStepOfStageOne) {
  EXPECT_EQ(default_reference_steps(Schedule(load_recipe("tiny"))), (std::vector<int64_t>{0, 8}));
  // `head`: stage 1 starts at round(1270/3) = 423 (odd), so the pair is 424, 425.
  EXPECT_EQ(default_reference_steps(Schedule(load_recipe("head"))), (std::vector<int64_t>{0, 424}));
}

void expect_rejected(ReferenceExportOptions options, const std::string& needle) {
  try {
    write_reference_export(std::move(options));
    ADD_FAILURE() << "accepted; expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ReferenceExport, BadStepsAndWindowsAreRejectedNamingTheFlag) {
  test::RunScratch scratch;
  ReferenceExportOptions o = tiny_export(scratch);
  o.steps = {1};
  expect_rejected(o, "--steps 1: expected an even step");
  o.steps = {26};
  expect_rejected(o, "--steps 26: expected an even step in [0, 24]");
  o.steps = {0, 0};
  expect_rejected(o, "--steps 0: given twice");
  o.steps = {8};
  o.run.overrides.push_back("schedule.num_scheduled=27");  // stages end at 9, 18, 27: step 9 starts stage 1
  expect_rejected(o, "--steps 8: step 9 starts another stage");
  o = tiny_export(scratch);
  o.validation_tokens = 40;
  expect_rejected(o, "--val-tokens 40: expected a positive multiple of 16");
  o = tiny_export(scratch);
  o.microbatches = 0;
  expect_rejected(o, "--microbatches 0: expected 1 to 16");
  o.microbatches = 17;
  expect_rejected(o, "--microbatches 17: expected 1 to 16");
  o = tiny_export(scratch);
  o.perturbed_attention_layer = 11;  // tiny keeps head's 11 layers
  expect_rejected(o, "--perturb-attention-layer 11: expected a layer in [0, 10]");
  o = tiny_export(scratch);
  o.perturbed_attention_layer = 0;
  o.mutation_factor = 1;
  expect_rejected(o, "--mutation-factor 1: expected a factor in (0, 10] other than 1");
  o.mutation_factor = -2;
  expect_rejected(o, "--mutation-factor -2: expected a factor in (0, 10] other than 1");
  o = tiny_export(scratch);
  o.checkpoint = scratch.root() / "missing.ckpt";
  expect_rejected(o, "missing.ckpt");
  o = tiny_export(scratch);
  o.run.data_dir = scratch.root() / "missing";
  expect_rejected(o, "--data");
  EXPECT_FALSE(fs::exists(scratch.out() / "manifest.json"));
}

TEST(ReferenceExport, CommandLineReportsBadStepsWithExitTwo) {
  test::RunScratch scratch;
  const test::Outcome o = test::run_program(
      scratch, "reference_export",
      "--recipe tiny --data " + scratch.data().string() + " --seed 1 --out " + scratch.out().string() + " --steps 3");
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_NE(o.stderr_text.find("--steps 3: expected an even step"), std::string::npos) << o.stderr_text;
}

// The plain export of `o` in ROOT/plain and the one with `mutate` applied in ROOT/perturbed.
struct ExportPair {
  fs::path plain_dir, perturbed_dir;
  json plain, perturbed;
};
ExportPair export_with_and_without(const test::RunScratch& scratch, ReferenceExportOptions o,
                                   const std::function<void(ReferenceExportOptions&)>& mutate) {
  ExportPair e{scratch.root() / "plain", scratch.root() / "perturbed", {}, {}};
  o.run.out_dir = e.plain_dir;
  e.plain = json::parse(std::ifstream(write_reference_export(o)));
  mutate(o);
  o.run.out_dir = e.perturbed_dir;
  e.perturbed = json::parse(std::ifstream(write_reference_export(o)));
  return e;
}

// The one-microbatch tiny export with and without the mutation that `flag` switches on, at factor 1.05; the
// perturbed manifest must name it.
ExportPair export_switch_mutation(const test::RunScratch& scratch, bool ReferenceExportOptions::*flag,
                                  const char* kind) {
  ReferenceExportOptions o = tiny_export(scratch);
  o.microbatches = 1;
  ExportPair e = export_with_and_without(scratch, o, [flag](ReferenceExportOptions& p) {
    p.*flag = true;
    p.mutation_factor = 1.05;
  });
  EXPECT_EQ(e.perturbed["mutation"]["kind"], kind);
  EXPECT_EQ(e.perturbed["mutation"]["factor"], 1.05);
  return e;
}

// The mutation proof's switch: a 1% larger attention scale in layer 0 changes what depends on that layer and the
// manifest says so. At initialisation lm_head's N(0, 0.005²) weights make the logits nearly independent of the
// body, so the effect is small there (the GPU check runs this mutation on trained weights).
TEST(ReferenceExport, PerturbedAttentionScaleChangesTheResultsAndIsRecorded) {
  test::RunScratch scratch;
  ReferenceExportOptions o = tiny_export(scratch);
  o.microbatches = 1;
  const ExportPair e =
      export_with_and_without(scratch, o, [](ReferenceExportOptions& p) { p.perturbed_attention_layer = 0; });
  EXPECT_EQ(e.perturbed["mutation"]["kind"], "attention_scale");
  EXPECT_EQ(e.perturbed["mutation"]["layer"], 0);
  EXPECT_EQ(e.perturbed["mutation"]["factor"], 1.01);  // the default size: a 1% error
  const json& a = e.plain["steps"][0];
  const json& b = e.perturbed["steps"][0];
  EXPECT_NE(read_floats(e.plain_dir, a["validation"]["losses"]),
            read_floats(e.perturbed_dir, b["validation"]["losses"]));
  EXPECT_NE(read_floats(e.plain_dir, by_name(a["microbatches"][0]["gradients"], "vo_bank")),
            read_floats(e.perturbed_dir, by_name(b["microbatches"][0]["gradients"], "vo_bank")));
  EXPECT_NE(a["microbatches"][0]["after_odd"]["train"]["loss_mean"],
            b["microbatches"][0]["after_odd"]["train"]["loss_mean"]);
  // The initial weights do not depend on the switch.
  EXPECT_EQ(read_floats(e.plain_dir, by_name(e.plain["initial"], "qk_bank")),
            read_floats(e.perturbed_dir, by_name(e.perturbed["initial"], "qk_bank")));
}

// The MUDD mutation: layer 10's coefficients μ × 1.05 change the forward from the initial weights on (μ = 0.1·b2
// there, the output rows being zero), so the validation losses and the gradients of the layers that μ mixes move;
// the weights do not.
TEST(ReferenceExport, PerturbedMuddScaleChangesTheResultsAndIsRecorded) {
  test::RunScratch scratch;
  const ExportPair e = export_switch_mutation(scratch, &ReferenceExportOptions::perturbed_mudd_scale, "mudd_scale");
  const json& a = e.plain["steps"][0];
  const json& b = e.perturbed["steps"][0];
  EXPECT_NE(read_floats(e.plain_dir, a["validation"]["losses"]),
            read_floats(e.perturbed_dir, b["validation"]["losses"]));
  for (const std::string name : {"mudd_b2", "mlp_bank"}) {
    EXPECT_NE(read_floats(e.plain_dir, by_name(a["microbatches"][0]["gradients"], name)),
              read_floats(e.perturbed_dir, by_name(b["microbatches"][0]["gradients"], name)))
        << name;
  }
  EXPECT_EQ(read_floats(e.plain_dir, by_name(e.plain["initial"], "mudd_b2")),
            read_floats(e.perturbed_dir, by_name(e.perturbed["initial"], "mudd_b2")));
}

// The second mutation switch, at a chosen size: one Adam group's learning rate × 1.05 scales that group's odd-step
// update by 1.05 and leaves the others as they were (lm_head: its gradient is never zero at initialisation, unlike
// the MUDD weights behind zero-initialised output rows).
TEST(ReferenceExport, PerturbedAdamLearningRateScalesOneGroupsUpdate) {
  test::RunScratch scratch;
  ReferenceExportOptions o = tiny_export(scratch);
  o.microbatches = 1;
  const ExportPair e = export_with_and_without(scratch, o, [](ReferenceExportOptions& p) {
    p.perturbed_adam_group = "lm_head";
    p.mutation_factor = 1.05;
  });
  const json& plain = e.plain;
  const json& perturbed = e.perturbed;
  const fs::path& plain_dir = e.plain_dir;
  EXPECT_EQ(perturbed["mutation"]["kind"], "adam_lr");
  EXPECT_EQ(perturbed["mutation"]["group"], "lm_head");
  EXPECT_EQ(perturbed["mutation"]["factor"], 1.05);
  auto update = [&](const fs::path& dir, const json& m, const std::string& name) {
    std::vector<double> after =
        read_floats(dir, by_name(m["steps"][0]["microbatches"][0]["after_odd"]["tensors"], name));
    const std::vector<double> before = read_floats(dir, by_name(m["initial"], name));
    for (size_t i = 0; i < after.size(); ++i) after[i] -= before[i];
    return after;
  };
  const std::vector<double> a = update(plain_dir, plain, "lm_head"), b = update(e.perturbed_dir, perturbed, "lm_head");
  double dot = 0, aa = 0;
  for (size_t i = 0; i < a.size(); ++i) dot += a[i] * b[i], aa += a[i] * a[i];
  ASSERT_GT(aa, 0);
  EXPECT_NEAR(dot / aa, 1.05, 2e-3);  // the least-squares ratio of the two updates
  EXPECT_EQ(update(plain_dir, plain, "scalars"), update(e.perturbed_dir, perturbed, "scalars"));

  o.perturbed_adam_group = "no_such_group";
  expect_rejected(o, "--perturb-adam-lr no_such_group: not an Adam group of recipe 'tiny'");
  o.perturbed_adam_group = "lm_head";
  o.perturbed_attention_layer = 0;
  expect_rejected(o, "one mutation at a time");
  o.perturbed_attention_layer = -1;
  o.perturbed_bank_lr = true;
  expect_rejected(o, "one mutation at a time");
  o.perturbed_bank_lr = false;
  o.perturbed_mudd_scale = true;
  expect_rejected(o, "one mutation at a time");
}

// The optimizer's own mutation: NorMuon's learning rate × 1.05 scales the even step's bank updates by about 1.05
// (the cautious weight decay goes with lr², so not exactly) from the same gradient, which the mutation leaves alone.
TEST(ReferenceExport, PerturbedBankLearningRateScalesTheBankUpdates) {
  test::RunScratch scratch;
  const ExportPair e = export_switch_mutation(scratch, &ReferenceExportOptions::perturbed_bank_lr, "bank_lr");
  const json& plain = e.plain["steps"][0]["microbatches"][0];
  const json& perturbed = e.perturbed["steps"][0]["microbatches"][0];
  auto even_update = [&](const fs::path& dir, const json& m, const json& draw, const std::string& name) {
    std::vector<double> after = read_floats(dir, by_name(draw["after_even"]["tensors"], name));
    const std::vector<double> before = read_floats(dir, by_name(m["initial"], name));
    for (size_t i = 0; i < after.size(); ++i) after[i] -= before[i];
    return after;
  };
  for (const std::string bank : {"qk_bank", "mlp_bank"}) {
    EXPECT_EQ(read_floats(e.plain_dir, by_name(plain["gradients"], bank)),
              read_floats(e.perturbed_dir, by_name(perturbed["gradients"], bank)))
        << bank;
    const std::vector<double> a = even_update(e.plain_dir, e.plain, plain, bank);
    const std::vector<double> b = even_update(e.perturbed_dir, e.perturbed, perturbed, bank);
    double dot = 0, aa = 0;
    for (size_t i = 0; i < a.size(); ++i) dot += a[i] * b[i], aa += a[i] * a[i];
    ASSERT_GT(aa, 0) << bank;
    EXPECT_NEAR(dot / aa, 1.05, 1e-2) << bank;  // the least-squares ratio of the two updates
  }
}

}  // namespace
}  // namespace gpt
