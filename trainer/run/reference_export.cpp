#include "trainer/run/reference_export.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "trainer/build_info.h"
#include "trainer/data/host_products.h"
#include "trainer/data/val_loader.h"
#include "trainer/optim/optimizer.h"
#include "trainer/run/gpt_trainable.h"
#include "trainer/run/training_state.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace gpt {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Writes raw little-endian tensor files under one folder and describes each one for the manifest.
class TensorFiles {
 public:
  explicit TensorFiles(fs::path dir) : dir_(std::move(dir)) {}

  // A tensor in its own dtype (f64 is written as f32: the reference runs in bf16/f32).
  json write(const std::string& stem, const Tensor& tensor) {
    Tensor host = tensor.to(Device::cpu);
    if (host.dtype() == DType::f64) host = host.to(DType::f32);
    const DType dtype = host.dtype();
    GPT_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::i32 || dtype == DType::i64,
              "reference export: ", stem, " has dtype ", dtype_name(dtype), ", expected f32, bf16, i32 or i64");
    const std::string file = stem + "." + dtype_name(dtype);
    write_bytes(file, host.raw(), host.nbytes());
    return {{"file", file}, {"dtype", dtype_name(dtype)}, {"shape", host.shape()}, {"bytes", host.nbytes()}};
  }

  template <typename T>
  json write(const std::string& stem, const std::vector<T>& values) {
    Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, dtype_of<T>());
    std::copy(values.begin(), values.end(), t.data<T>());
    return write(stem, t);
  }

 private:
  void write_bytes(const std::string& file, const void* data, size_t bytes) {
    const fs::path path = dir_ / file;
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    GPT_CHECK(out.good(), "reference export: cannot create '", path.string(), "'");
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    out.close();
    GPT_CHECK(out.good(), "reference export: writing '", path.string(), "' failed");
  }

  fs::path dir_;
};

// Every parameter's value (or gradient) with both names.
json write_parameters(TensorFiles& files, ParameterSet& params, const std::string& prefix, bool gradients) {
  json list = json::array();
  for (Parameter& p : params.all()) {
    json entry = files.write(prefix + "." + p.name, gradients ? p.grad : p.value);
    entry["name"] = p.name;
    entry["reference_name"] = reference_state_name(p.name);
    entry["layout"] = "same";  // world size 1: no bank padding on either side, identical axis order
    list.push_back(std::move(entry));
  }
  return list;
}

// The first `tokens` positions of a validation window: with causal attention their losses do not depend on the
// positions after them, and segments are cut at the new end.
Microbatch leading_positions(const Microbatch& window, int64_t tokens) {
  Microbatch mb = window;
  const auto n = static_cast<size_t>(tokens);
  mb.inputs.resize(n);
  mb.targets.resize(n);
  mb.bigram_ids.resize(n);
  mb.sign_rows.resize(n);
  for (int32_t& c : mb.cu_seqlens) c = std::min<int32_t>(c, static_cast<int32_t>(tokens));
  mb.max_seqlen = longest_segment(mb.cu_seqlens);
  return mb;
}

json write_batch(TensorFiles& files, const std::string& prefix, const Microbatch& mb) {
  return {{"tokens", mb.inputs.size()},
          {"max_seqlen", mb.max_seqlen},
          {"inputs", files.write(prefix + ".inputs", mb.inputs)},
          {"targets", files.write(prefix + ".targets", mb.targets)},
          {"cu_seqlens", files.write(prefix + ".cu_seqlens", mb.cu_seqlens)},
          {"bigram_ids", files.write(prefix + ".bigram_ids", mb.bigram_ids)},
          {"sign_rows", files.write(prefix + ".sign_rows", mb.sign_rows)}};
}

// What GPT.forward's schedule argument and the optimizer need at step s (RECIPE §5), in the reference's units.
json schedule_arguments(const Schedule& schedule, const Recipe& recipe, int64_t step) {
  const StepSchedule s = schedule.at(step);
  json yarn = json::array();
  for (const YarnEvent& e : schedule.yarn_events())
    if (e.step <= step) yarn.push_back({{"step", e.step}, {"old_long_tokens", e.old_long_tokens},
                                        {"new_long_tokens", e.new_long_tokens}});
  return {{"step", step},
          {"stage", s.stage},
          {"stage_begin", s.stage_begin},
          {"window_block", recipe.schedule.window_block},
          {"ws_short_blocks", s.ws_short_blocks},
          {"ws_long_blocks", s.ws_long_blocks},
          {"ws_short_tokens", s.ws_short_tokens},
          {"ws_long_tokens", s.ws_long_tokens},
          {"train_max_seq_len", s.lmax},
          {"mtp_weights", s.mtp_weights},
          {"prefix_weight", s.prefix_weight},
          {"lr_mult", s.lr_mult},
          {"momentum", s.momentum},
          {"adam_step", s.adam_step},
          {"tied", s.tied},
          {"split_step", s.split_step},
          {"yarn_events", yarn}};
}

void check_steps(const std::vector<int64_t>& steps, const Schedule& schedule) {
  GPT_CHECK(!steps.empty(), "--steps: expected at least one step");
  std::set<int64_t> seen;
  for (int64_t s : steps) {
    GPT_CHECK(s >= 0 && s + 1 < schedule.total_steps(), "--steps ", s, ": expected an even step in [0, ",
              schedule.total_steps() - 2, "] (the pair s, s + 1 is trained)");
    GPT_CHECK(s % 2 == 0, "--steps ", s, ": expected an even step (s is a NorMuon-only step, s + 1 adds Adam)");
    GPT_CHECK(schedule.stage_of(s + 1) == schedule.stage_of(s), "--steps ", s, ": step ", s + 1,
              " starts another stage; both steps of a pair must share the microbatch shape");
    GPT_CHECK(seen.insert(s).second, "--steps ", s, ": given twice");
  }
}

}  // namespace

std::string reference_state_name(const std::string& ours) {
  static const std::map<std::string, std::string> renamed = {{"embed", "embed.weight"},
                                                             {"lm_head", "lm_head.weight"},
                                                             {"bigram_embed", "bigram_embed.weight"},
                                                             {"smear_gate", "smear_gate.weight"}};
  const auto it = renamed.find(ours);
  return it == renamed.end() ? ours : it->second;
}

std::vector<int64_t> default_reference_steps(const Schedule& schedule) {
  std::vector<int64_t> steps{0};
  if (schedule.num_stages() > 1) {
    const int64_t begin = schedule.stage_begin(1);
    const int64_t even = begin + (begin % 2);
    if (even + 1 < schedule.stage_end(1)) steps.push_back(even);
  }
  return steps;
}

fs::path write_reference_export(ReferenceExportOptions options) {
  // FP8 off on our side (the check compares against the reference with DISABLE_FP8 and an exact loss GEMM).
  options.run.overrides.push_back("fp8=false");
  if (options.run.run_id.empty()) options.run.run_id = "reference-export";
  options.run.echo = false;
  GPT_CHECK(!options.run.out_dir.empty(), "--out: expected the export folder");
  TrainingRun run(options.run);
  const Recipe& recipe = run.recipe();
  const Schedule& schedule = run.schedule();
  if (options.steps.empty()) options.steps = default_reference_steps(schedule);
  check_steps(options.steps, schedule);
  auto* model = dynamic_cast<GptTrainable*>(&run.model());
  GPT_CHECK(model != nullptr, "reference export: needs the GPT model (debug.model=gpt)");
  Optimizer& optimizer = run.optimizer();
  ParameterSet& params = model->parameters();
  const int64_t window_tokens = recipe.validation.batch_tokens;
  GPT_CHECK(options.validation_tokens >= 16 && options.validation_tokens % 16 == 0,
            "--val-tokens ", options.validation_tokens, ": expected a positive multiple of 16 (the reference's "
            "attention needs T % 16 == 0)");
  const int64_t val_tokens = std::min(options.validation_tokens, window_tokens);
  const int64_t accumulation = recipe.slices_per_call;  // world size 1

  TensorFiles files(options.run.out_dir);
  json manifest;
  manifest["format"] = "train_gpt reference export";
  manifest["version"] = 1;
  manifest["recipe"] = recipe.name;
  manifest["recipe_hash"] = recipe.hash();
  manifest["seed"] = options.run.seed;
  manifest["backend"] = options.run.backend;
  manifest["world_size"] = 1;
  manifest["accumulation"] = accumulation;
  manifest["fp8"] = recipe.fp8;
  manifest["git_commit"] = build_info().git_commit;
  manifest["model"] = {{"model_dim", recipe.model.model_dim},   {"num_heads", recipe.model.num_heads},
                       {"head_dim", recipe.model.head_dim},     {"num_layers", recipe.model.num_layers},
                       {"vocab_size", recipe.model.vocab_size}, {"mlp_hidden", recipe.model.mlp_hidden},
                       {"bigram_rows", recipe.model.bigram_rows}, {"mudd_hidden", recipe.model.mudd_hidden},
                       {"description", model->description()}};
  manifest["total_steps"] = schedule.total_steps();
  manifest["loss_convention"] =
      "objective = (1/A)·Σ_t ℓ_t over the microbatch (the reference: forward(...).sum() * grad_scale); "
      "loss_mean = Σ_t ℓ_t / T; gradients are those of the objective";

  // Initial state and buffers, shared by every step pair (each pair starts from it).
  manifest["initial"] = write_parameters(files, params, "initial", false);
  json buffers = json::array();
  for (const NamedTensor& b : model->buffers()) {
    if (b.name != "bigram_sign_table") continue;  // the YaRN event count is implied by the step
    json entry = files.write("buffer." + b.name, b.tensor);
    entry["name"] = b.name;
    entry["reference_name"] = reference_state_name(b.name);
    entry["layout"] = "same";
    buffers.push_back(std::move(entry));
  }
  std::vector<int64_t> prefix_table(static_cast<size_t>(recipe.model.vocab_size), -1);
  if (model->uses_prefix_table()) {
    prefix_table = build_prefix_table(Gpt2Tokenizer::load_default(), recipe.model.vocab_size);
    model->set_prefix_table(prefix_table);
  }
  json prefix = files.write("buffer.prefix_table", prefix_table);
  prefix["name"] = "prefix_table";
  prefix["reference_name"] = "prefix_table";
  prefix["layout"] = "same";
  buffers.push_back(std::move(prefix));
  manifest["buffers"] = buffers;

  const std::vector<NamedTensor> live = collect_state(*model, optimizer);
  const std::vector<NamedTensor> initial = clone_state(live);
  const Microbatch val_window = leading_positions(run.val_loader().window(0), val_tokens);

  json steps = json::array();
  for (int64_t s : options.steps) {
    restore_state(live, initial, "reference export");
    optimizer.reset();
    params.zero_grads();
    model->after_state_restore();
    const std::string prefix_s = "step" + std::to_string(s);
    json entry;
    entry["step"] = s;
    entry["schedule"] = schedule_arguments(schedule, recipe, s);
    entry["schedule_next"] = schedule_arguments(schedule, recipe, s + 1);

    // The first slice of the loader's first call shaped for step s's stage: a real microbatch.
    const StepSchedule at_s = schedule.at(s);
    TrainLoader loader = run.make_train_loader({});
    const std::vector<Microbatch> call = loader.next(
        CallShape{.slice_tokens = at_s.slice_tokens, .max_doc_tokens = at_s.lmax,
                  .cu_seqlens_rows = static_cast<int32_t>(at_s.cu_rows)});
    const Microbatch& mb = call.front();
    const auto tokens = static_cast<double>(mb.inputs.size());
    entry["batch"] = write_batch(files, prefix_s + ".batch", mb);

    model->set_schedule(at_s);
    const std::vector<double> val_losses = model->validation_losses(val_window);
    double val_sum = 0;
    for (double l : val_losses) val_sum += l;
    entry["validation"] = write_batch(files, prefix_s + ".val", val_window);
    entry["validation"]["losses"] = files.write(prefix_s + ".val.losses",
                                                std::vector<float>(val_losses.begin(), val_losses.end()));
    entry["validation"]["mean_loss"] = val_sum / static_cast<double>(val_losses.size());
    entry["validation"]["model_mean_loss"] = model->validation_loss(val_window);  // the run's own code path

    const double loss_scale = 1.0 / static_cast<double>(accumulation);
    const double loss = model->train_microbatch(mb, loss_scale);
    GPT_CHECK(std::isfinite(loss), "reference export: non-finite training loss at step ", s);
    entry["train"] = {{"loss_mean", loss}, {"objective", loss * tokens * loss_scale}};
    entry["gradients"] = write_parameters(files, params, prefix_s + ".grad", true);

    optimizer.step(at_s);
    model->after_optimizer_step(at_s);
    entry["after_even"] = {{"step", s}, {"tensors", write_parameters(files, params, prefix_s + ".after_even", false)}};

    const StepSchedule next = schedule.at(s + 1);
    model->set_schedule(next);
    const double loss_next = model->train_microbatch(mb, loss_scale);
    GPT_CHECK(std::isfinite(loss_next), "reference export: non-finite training loss at step ", s + 1);
    optimizer.step(next);
    model->after_optimizer_step(next);
    entry["after_odd"] = {{"step", s + 1},
                          {"train", {{"loss_mean", loss_next}, {"objective", loss_next * tokens * loss_scale}}},
                          {"tensors", write_parameters(files, params, prefix_s + ".after_odd", false)}};
    steps.push_back(std::move(entry));
  }
  manifest["steps"] = steps;

  const fs::path path = options.run.out_dir / "manifest.json";
  std::ofstream out(path, std::ios::trunc);
  GPT_CHECK(out.good(), "reference export: cannot create '", path.string(), "'");
  out << manifest.dump(2) << '\n';
  out.close();
  GPT_CHECK(out.good(), "reference export: writing '", path.string(), "' failed");
  return path;
}

}  // namespace gpt
