#include "trainer/tools/reference_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <utility>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "trainer/build_info.h"
#include "trainer/data/host_products.h"
#include "trainer/data/val_loader.h"
#include "trainer/optim/optimizer.h"
#include "trainer/run/checkpoint.h"
#include "trainer/gpt/gpt_trainable.h"
#include "trainer/run/run_summary.h"
#include "trainer/export/tensor_files.h"
#include "trainer/run/training_state.h"
#include "trainer/step/step_runner.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace gpt {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Every parameter's value (or gradient) with both names; `only` (if given) selects parameters.
json write_parameters(const TensorFiles& files, ParameterSet& params, const std::string& prefix, bool gradients,
                      const std::function<bool(const Parameter&)>& only = nullptr) {
  json list = json::array();
  for (Parameter& p : params.all()) {
    if (only && !only(p)) continue;
    json entry = files.write(prefix + "." + p.name, gradients ? p.grad : p.value);
    entry["name"] = p.name;
    entry["reference_name"] = reference_state_name(p.name);
    entry["layout"] = "same";  // world size 1: no bank padding on either side, identical axis order
    list.push_back(std::move(entry));
  }
  return list;
}

// The parameters after an optimizer step, each bf16 bank with its NorMuon mantissa (§4.3: the low 16 bits of the
// fp32 value whose high half is the bf16 weight). An update smaller than one bf16 step shows only there: comparing
// the visible bf16 weights alone turns a 1e-3 difference of the update into a one-step difference of many entries.
json write_updated_parameters(const TensorFiles& files, ParameterSet& params, const Optimizer& optimizer,
                              const std::string& prefix, const std::function<bool(const Parameter&)>& only = nullptr) {
  json list = write_parameters(files, params, prefix, false, only);
  if (optimizer.bank_optimizer() != Optimizer::BankOptimizer::normuon) return list;
  for (json& entry : list) {
    const std::string name = entry["name"].get<std::string>();
    if (params.get(name).kind != ParamKind::bank) continue;
    const Tensor& mantissa = optimizer.bank_state(name).mantissa;
    if (mantissa.defined()) entry["mantissa"] = files.write(prefix + "." + name + ".mantissa", mantissa);
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

// What GPT.forward's schedule argument and the optimizer need at step s (RECIPE §5), in the reference's units.
json schedule_arguments(const Schedule& schedule, const Recipe& recipe, int64_t step) {
  const StepSchedule s = schedule.at(step);
  json yarn = json::array();
  for (const YarnEvent& e : schedule.yarn_events())
    if (e.step <= step)
      yarn.push_back(
          {{"step", e.step}, {"old_long_tokens", e.old_long_tokens}, {"new_long_tokens", e.new_long_tokens}});
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

namespace {

// The state a step pair starts from, and where it came from.
struct PairStart {
  std::vector<NamedTensor> state;  // collect_state's names: parameters, buffers, optimizer state, gradients
  LoaderPosition loader;           // where the pair's microbatches are read
  json source;                     // for the manifest
};

// The parameters and buffers of `checkpoint` over the live state (optimizer state and gradients stay as they are:
// the pair starts from a fresh optimizer, as the reference's does).
PairStart checkpoint_start(const fs::path& path, const std::vector<NamedTensor>& live, const Recipe& recipe,
                           int64_t& step) {
  CheckpointData data = read_checkpoint(path);
  const CheckpointMeta meta = CheckpointMeta::from_json(data.meta, path.string());
  GPT_CHECK(meta.recipe_name == recipe.name, "--checkpoint ", path.string(), ": written by a run of recipe '",
            meta.recipe_name, "', the export runs '", recipe.name, "'");
  GPT_CHECK(meta.world_size == 1, "--checkpoint ", path.string(), ": written by a run of ", meta.world_size,
            " ranks; the export needs a one-rank run's checkpoint (the whole optimizer state in one file)");
  step = meta.next_step;
  std::vector<NamedTensor> model_part;
  for (NamedTensor& t : data.tensors)
    if (t.name.starts_with("param/") || t.name.starts_with("buffer/")) model_part.push_back(std::move(t));
  std::vector<NamedTensor> state = clone_state(live);
  std::vector<NamedTensor> targets;
  for (const NamedTensor& t : state)
    if (t.name.starts_with("param/") || t.name.starts_with("buffer/")) targets.push_back(t);
  restore_state(targets, model_part, "--checkpoint " + path.string());
  return {std::move(state),
          meta.loader,
          {{"source", "checkpoint"},
           {"file", path.filename().string()},
           {"trained_steps", meta.next_step},
           {"run_id", meta.run_id},
           {"seed", meta.seed},
           {"recipe_hash", meta.recipe_hash}}};
}

}  // namespace

// Draws per pair: each writes a full set of gradients and weights (gigabytes at `head`'s sizes).
constexpr int64_t kMaxMicrobatches = 16;

namespace {

// Checks the mutation options and makes the run's options the export's (FP8 off: the check compares against the
// reference with DISABLE_FP8 and an exact loss GEMM). An Adam-lr or bank-lr mutation becomes the recipe override it
// is; returns the manifest's "mutation" entry (null when none, or when it is the model's own, attention or MUDD
// scale, set once the model exists).
json prepare_options(ReferenceExportOptions& options) {
  options.run.overrides.push_back("fp8=false");
  if (options.run.run_id.empty()) options.run.run_id = "reference-export";
  const int mutations = static_cast<int>(!options.perturbed_adam_group.empty()) +
                        static_cast<int>(options.perturbed_attention_layer >= 0) +
                        static_cast<int>(options.perturbed_bank_lr) + static_cast<int>(options.perturbed_mudd_scale);
  GPT_CHECK(mutations <= 1,
            "--perturb-adam-lr, --perturb-bank-lr, --perturb-attention-layer and --perturb-mudd-scale: one mutation "
            "at a time");
  const double factor = options.mutation_factor;
  GPT_CHECK(std::isfinite(factor) && factor > 0 && factor != 1 && factor <= 10, "--mutation-factor ", factor,
            ": expected a factor in (0, 10] other than 1");
  options.run.echo = false;
  GPT_CHECK(!options.run.out_dir.empty(), "--out: expected the export folder");
  json mutation;
  if (options.perturbed_adam_group.empty() && !options.perturbed_bank_lr) return mutation;
  const Recipe plain = load_recipe(options.run.recipe, options.run.overrides, options.run.recipe_dir);
  // The override "key=value·factor", the value written to full double precision.
  auto scale_key = [&](const std::string& key, double value) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.17g", value * factor);
    options.run.overrides.push_back(key + "=" + text);
  };
  if (!options.perturbed_adam_group.empty()) {
    const std::string& group = options.perturbed_adam_group;
    const auto it = plain.optimizer.adam.find(group);
    GPT_CHECK(it != plain.optimizer.adam.end(), "--perturb-adam-lr ", group, ": not an Adam group of recipe '",
              plain.name, "'");
    scale_key("optimizer.adam." + group + ".lr_mul", it->second.lr_mul);
    mutation = {{"kind", "adam_lr"}, {"group", group}, {"factor", factor}};
  } else {
    scale_key("optimizer.bank_lr", plain.optimizer.bank_lr);
    mutation = {{"kind", "bank_lr"}, {"factor", factor}};
  }
  return mutation;
}

// What every step pair of the export works with: the run's own parts (every schedule application, forward/backward
// and optimizer step is the run's, step_runner.h), the GPT's typed handle and the files.
struct ExportParts {
  const ReferenceExportOptions& options;
  TrainingRun& run;
  GptTrainable& model;
  const Recipe& recipe;
  const Schedule& schedule;
  Optimizer& optimizer;
  StepRunner& runner;
  ParameterSet& params;
  TensorFiles files;
  int64_t accumulation = 1;       // world size 1
  std::vector<NamedTensor> live;  // collect_state of the model and optimizer
  Microbatch val_window;          // validation window 0, cut to --val-tokens
};

// Checks the options that need the recipe and applies the model's mutations (attention scale, MUDD scale); returns
// the validation positions.
int64_t check_against_recipe(ReferenceExportOptions& options, const Recipe& recipe, const Schedule& schedule,
                             GptTrainable& model, json& mutation) {
  if (options.steps.empty() && options.checkpoint.empty()) options.steps = default_reference_steps(schedule);
  if (!options.steps.empty()) check_steps(options.steps, schedule);
  GPT_CHECK(options.validation_tokens >= 16 && options.validation_tokens % 16 == 0, "--val-tokens ",
            options.validation_tokens,
            ": expected a positive multiple of 16 (the reference's "
            "attention needs T % 16 == 0)");
  const int64_t val_tokens = std::min(options.validation_tokens, recipe.validation.batch_tokens);
  GPT_CHECK(options.microbatches >= 1 && options.microbatches <= kMaxMicrobatches, "--microbatches ",
            options.microbatches, ": expected 1 to ", kMaxMicrobatches);
  GPT_CHECK(options.perturbed_attention_layer >= -1 && options.perturbed_attention_layer < recipe.model.num_layers,
            "--perturb-attention-layer ", options.perturbed_attention_layer, ": expected a layer in [0, ",
            recipe.model.num_layers - 1, "] (or -1: none)");
  model.perturb_attention_scale(options.perturbed_attention_layer, options.mutation_factor);
  if (options.perturbed_attention_layer >= 0) {
    mutation = {
        {"kind", "attention_scale"}, {"layer", options.perturbed_attention_layer}, {"factor", options.mutation_factor}};
  }
  if (options.perturbed_mudd_scale) {
    model.perturb_mudd_scale(options.mutation_factor);
    mutation = {{"kind", "mudd_scale"}, {"factor", options.mutation_factor}};
  }
  return val_tokens;
}

// The manifest's description of the export: format, recipe, run, model and schedule.
json manifest_header(const ExportParts& ex, const json& mutation) {
  const Recipe& recipe = ex.recipe;
  json manifest;
  manifest["format"] = "train_gpt reference export";
  manifest["version"] = 2;
  manifest["recipe"] = recipe.name;
  manifest["recipe_hash"] = recipe.hash();
  manifest["seed"] = ex.options.run.seed;
  manifest["backend"] = ex.options.run.backend;
  manifest["world_size"] = 1;
  manifest["accumulation"] = ex.accumulation;
  manifest["fp8"] = recipe.fp8;
  manifest["git_commit"] = build_info().git_commit;
  if (!mutation.is_null()) manifest["mutation"] = mutation;
  manifest["model"] = {{"model_dim", recipe.model.model_dim},     {"num_heads", recipe.model.num_heads},
                       {"head_dim", recipe.model.head_dim},       {"num_layers", recipe.model.num_layers},
                       {"vocab_size", recipe.model.vocab_size},   {"mlp_hidden", recipe.model.mlp_hidden},
                       {"bigram_rows", recipe.model.bigram_rows}, {"mudd_hidden", recipe.model.mudd_hidden},
                       {"description", ex.model.description()}};
  manifest["total_steps"] = ex.schedule.total_steps();
  // A shortened schedule (--set schedule.num_scheduled=…): the check rebuilds the reference's schedule to match.
  manifest["num_scheduled"] = recipe.schedule.num_scheduled;
  manifest["num_extension"] = recipe.schedule.num_extension;
  manifest["loss_convention"] =
      "objective = (1/A)·Σ_t ℓ_t over the microbatch (the reference: forward(...).sum() * grad_scale); "
      "loss_mean = Σ_t ℓ_t / T; gradients are those of the objective";
  return manifest;
}

// The buffers every step pair shares: the bigram sign table and the §3.2 prefix table (set on the model here when it
// uses one; all -1 otherwise).
json write_buffers(ExportParts& ex) {
  json buffers = json::array();
  for (const NamedTensor& b : ex.model.buffers()) {
    if (b.name != "bigram_sign_table") continue;  // the YaRN event count is implied by the step
    json entry = ex.files.write("buffer." + b.name, b.tensor);
    entry["name"] = b.name;
    entry["reference_name"] = reference_state_name(b.name);
    entry["layout"] = "same";
    buffers.push_back(std::move(entry));
  }
  std::vector<int64_t> prefix_table(static_cast<size_t>(ex.recipe.model.vocab_size), -1);
  if (ex.model.uses_prefix_table()) {
    prefix_table = build_prefix_table(Gpt2Tokenizer::load_default(), ex.recipe.model.vocab_size);
    ex.model.set_prefix_table(prefix_table);
  }
  json prefix = ex.files.write("buffer.prefix_table", prefix_table);
  prefix["name"] = "prefix_table";
  prefix["reference_name"] = "prefix_table";
  prefix["layout"] = "same";
  buffers.push_back(std::move(prefix));
  return buffers;
}

// The step pairs in export order: those of --steps from the initial weights, then the checkpoint's.
std::vector<std::pair<int64_t, PairStart>> pair_starts(const ExportParts& ex) {
  std::vector<std::pair<int64_t, PairStart>> pairs;
  for (int64_t s : ex.options.steps) pairs.push_back({s, PairStart{clone_state(ex.live), {}, {{"source", "initial"}}}});
  if (!ex.options.checkpoint.empty()) {
    int64_t s = 0;
    PairStart start = checkpoint_start(ex.options.checkpoint, ex.live, ex.recipe, s);
    GPT_CHECK(std::ranges::none_of(ex.options.steps, [&](int64_t t) { return t == s; }), "--checkpoint ",
              ex.options.checkpoint.string(), ": its step ", s, " is also in --steps; a pair is exported once");
    check_steps({s}, ex.schedule);
    pairs.push_back({s, std::move(start)});
  }
  return pairs;
}

// Restores the pair's start with a fresh optimizer state and no gradients (the reference's fresh manager).
void restore_start(ExportParts& ex, const PairStart& start) {
  restore_state(ex.live, start.state, "reference export");
  ex.optimizer.reset();
  ex.params.zero_grads();
  ex.model.after_state_restore();
}

// One draw of a pair: microbatch `mb` trained at s (gradients, the even step's weights) and at s + 1 (what the odd
// step's optimizer reads, its weights), from the pair's start. `adam_start` holds the Adam parameters at the start.
json export_draw(ExportParts& ex, const PairStart& start, int64_t s, int64_t m, const Microbatch& mb,
                 const std::map<std::string, Tensor>& adam_start) {
  const StepSchedule at_s = ex.schedule.at(s), next = ex.schedule.at(s + 1);
  const std::string prefix_m = "step" + std::to_string(s) + ".mb" + std::to_string(m);
  const auto tokens = static_cast<double>(mb.inputs.size());
  const double loss_scale = 1.0 / static_cast<double>(ex.accumulation);
  restore_start(ex, start);
  ex.runner.apply_schedule(at_s);
  json draw;
  draw["index"] = m;
  draw["batch"] = ex.files.write_batch(prefix_m + ".batch", mb);
  const double fp8_objective = ex.model.fp8_lm_head_objective(mb);
  const double loss = ex.runner.train_microbatch(at_s, mb, ex.accumulation);
  GPT_CHECK(std::isfinite(loss), "reference export: non-finite training loss at step ", s, ", microbatch ", m);
  draw["train"] = {
      {"loss_mean", loss}, {"objective", loss * tokens * loss_scale}, {"objective_fp8_lm_head", fp8_objective}};
  draw["gradients"] = write_parameters(ex.files, ex.params, prefix_m + ".grad", true);

  ex.runner.optimizer_step(at_s);
  // §4.1: an even step moves only the banks. The other parameters are checked unchanged here and listed by
  // name (the check asserts the same of the reference), which keeps a draw's files a third smaller.
  json unchanged = json::array();
  for (const Parameter& p : ex.params.all()) {
    if (p.kind == ParamKind::bank) continue;
    const Tensor& before = adam_start.at(p.name);
    const Tensor after = p.value.to(Device::cpu);
    GPT_CHECK(std::memcmp(before.raw(), after.raw(), after.nbytes()) == 0, "reference export: the even step ", s,
              " changed Adam parameter ", p.name, " (§4.1: Adam steps are odd)");
    unchanged.push_back(reference_state_name(p.name));
  }
  draw["after_even"] = {
      {"step", s},
      {"unchanged", unchanged},
      {"tensors", write_updated_parameters(ex.files, ex.params, ex.optimizer, prefix_m + ".after_even",
                                           [](const Parameter& p) { return p.kind == ParamKind::bank; })}};

  ex.runner.apply_schedule(next);
  const double loss_next = ex.runner.train_microbatch(next, mb, ex.accumulation);
  GPT_CHECK(std::isfinite(loss_next), "reference export: non-finite training loss at step ", s + 1);
  // What the odd step's optimizer reads (§4.1: the banks' gradient of s + 1, the Adam parameters' sum over s and
  // s + 1): the check feeds these and the even step's gradients to the reference's optimizer, which compares
  // the optimizers alone, without the spread that different gradients give Adam's first step.
  draw["gradients_odd"] = write_parameters(ex.files, ex.params, prefix_m + ".grad_odd", true);
  ex.runner.optimizer_step(next);
  draw["after_odd"] = {
      {"step", s + 1},
      {"train", {{"loss_mean", loss_next}, {"objective", loss_next * tokens * loss_scale}}},
      {"tensors", write_updated_parameters(ex.files, ex.params, ex.optimizer, prefix_m + ".after_odd")}};
  return draw;
}

// One step pair (s, s + 1) from `start`: its schedule arguments, the validation window's losses at s and the draws.
json export_pair(ExportParts& ex, int64_t s, const PairStart& start) {
  const std::string prefix_s = "step" + std::to_string(s);
  const bool from_checkpoint = start.source.at("source") == "checkpoint";
  json entry;
  entry["step"] = s;
  entry["weights"] = start.source;
  entry["schedule"] = schedule_arguments(ex.schedule, ex.recipe, s);
  entry["schedule_next"] = schedule_arguments(ex.schedule, ex.recipe, s + 1);
  const StepSchedule at_s = ex.schedule.at(s);

  restore_start(ex, start);
  if (from_checkpoint) entry["initial"] = write_parameters(ex.files, ex.params, prefix_s + ".initial", false);
  // Host copies of the Adam parameters' starting values, read once per pair: every draw's even step must leave
  // them unchanged (§4.1).
  std::map<std::string, Tensor> adam_start;
  for (const Parameter& p : ex.params.all())
    if (p.kind != ParamKind::bank) adam_start.emplace(p.name, p.value.to(Device::cpu));

  ex.runner.apply_schedule(at_s);
  const std::vector<double> val_losses = ex.model.validation_losses(ex.val_window);
  double val_sum = 0;
  for (double l : val_losses) val_sum += l;
  entry["validation"] = ex.files.write_batch(prefix_s + ".val", ex.val_window);
  entry["validation"]["losses"] =
      ex.files.write(prefix_s + ".val.losses", std::vector<float>(val_losses.begin(), val_losses.end()));
  entry["validation"]["mean_loss"] = val_sum / static_cast<double>(val_losses.size());
  entry["validation"]["model_mean_loss"] = ex.model.validation_loss(ex.val_window);  // the run's own code path

  // The first M slices of the loader's calls shaped for step s's stage (one call holds A of them): real
  // microbatches.
  TrainLoader loader = ex.run.make_train_loader(start.loader);
  std::vector<Microbatch> call;
  while (std::cmp_less(call.size(), ex.options.microbatches)) {
    std::vector<Microbatch> more = loader.next(call_shape(at_s));
    std::move(more.begin(), more.end(), std::back_inserter(call));
  }
  json microbatches = json::array();
  for (int64_t m = 0; m < ex.options.microbatches; ++m)
    microbatches.push_back(export_draw(ex, start, s, m, call.at(static_cast<size_t>(m)), adam_start));
  entry["microbatches"] = std::move(microbatches);
  return entry;
}

void write_manifest(const fs::path& path, const json& manifest) {
  std::ofstream out(path, std::ios::trunc);
  GPT_CHECK(out.good(), "reference export: cannot create '", path.string(), "'");
  out << manifest.dump(2) << '\n';
  out.close();
  GPT_CHECK(out.good(), "reference export: writing '", path.string(), "' failed");
}

}  // namespace

fs::path write_reference_export(ReferenceExportOptions options) {
  json mutation = prepare_options(options);
  // The run's own constructor builds the GPT (through this factory) and owns it; the export keeps its typed handle
  // for the checks only the GPT offers (per-position validation losses, the FP8 objective, the mutation proof).
  GptTrainable* model = nullptr;
  TrainingRun run(options.run, [&model](const Recipe& recipe, const RunOptions& run_options, Comm& comm) {
    std::unique_ptr<GptTrainable> gpt = make_gpt_model(recipe, run_options, comm);
    model = gpt.get();
    return std::unique_ptr<TrainableModel>(std::move(gpt));
  });
  const int64_t val_tokens = check_against_recipe(options, run.recipe(), run.schedule(), *model, mutation);
  ExportParts ex{options,
                 run,
                 *model,
                 run.recipe(),
                 run.schedule(),
                 run.optimizer(),
                 run.step_runner(),
                 model->parameters(),
                 TensorFiles(options.run.out_dir),
                 run.recipe().slices_per_call,  // world size 1: one rank accumulates every slice of a call
                 {},
                 {}};
  json manifest = manifest_header(ex, mutation);
  // Initial state and buffers, shared by every step pair that starts from initialisation.
  manifest["initial"] = write_parameters(ex.files, ex.params, "initial", false);
  manifest["buffers"] = write_buffers(ex);
  ex.live = collect_state(*model, ex.optimizer);
  const std::vector<std::pair<int64_t, PairStart>> pairs = pair_starts(ex);
  ex.val_window = leading_positions(run.val_loader().window(0), val_tokens);
  json steps = json::array();
  for (const auto& [s, start] : pairs) steps.push_back(export_pair(ex, s, start));
  manifest["steps"] = steps;
  const fs::path path = options.run.out_dir / "manifest.json";
  write_manifest(path, manifest);
  return path;
}

}  // namespace gpt
