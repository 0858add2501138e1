#include "trainer/schedule/schedule.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "base/check.h"

namespace gpt {

Schedule::Schedule(const Recipe& recipe) : recipe_(recipe) {
  const ScheduleConfig& sc = recipe_.schedule;
  GPT_CHECK(sc.stages.size() == sc.stage_durations.size() + 1, "schedule: recipe '", recipe_.name,
            "' needs one stage per duration plus the extension");
  double total = 0;
  for (double d : sc.stage_durations) total += d;
  // Stage ends are round(num_scheduled·c) for cumulative fractions c (§5.1); ties go to even like Python's round.
  // §S.1: growth_steps are then added to every end from stage growth_stage on (the last scheduled end always).
  GPT_CHECK(sc.growth_steps == 0 || sc.growth_stage < static_cast<int64_t>(sc.stage_durations.size()),
            "schedule: recipe '", recipe_.name, "' adds growth steps from stage ", sc.growth_stage,
            ", which is not a scheduled stage");
  main_steps_ = sc.num_scheduled + sc.growth_steps;
  double cumulative = 0;
  int64_t begin = 0;
  for (size_t i = 0; i < sc.stage_durations.size(); ++i) {
    cumulative += sc.stage_durations[i];
    const int64_t growth = static_cast<int64_t>(i) >= sc.growth_stage ? sc.growth_steps : 0;
    const int64_t end =
        growth +
        (i + 1 == sc.stage_durations.size()
             ? sc.num_scheduled
             : static_cast<int64_t>(std::nearbyint(static_cast<double>(sc.num_scheduled) * cumulative / total)));
    GPT_CHECK(end > begin, "schedule: stage ", i, " of recipe '", recipe_.name, "' is empty (", begin, " to ", end,
              "); check schedule.num_scheduled and schedule.stage_durations");
    begins_.push_back(begin);
    ends_.push_back(end);
    begin = end;
  }
  begins_.push_back(main_steps_);
  ends_.push_back(main_steps_ + sc.num_extension);
  total_steps_ = main_steps_ + sc.num_extension;
  // c0 = ⌊main·(1 − cooldown_frac)⌋ with main = num_scheduled + growth_steps (§5.2, §S.1).
  cooldown_start_ = static_cast<int64_t>(std::floor(static_cast<double>(main_steps_) * (1.0 - sc.cooldown_frac)));
  split_step_ = begins_[static_cast<size_t>(sc.split_stage)] | 1;
  GPT_CHECK(split_step_ < total_steps_, "schedule: split step ", split_step_, " lies beyond the run (", total_steps_,
            " steps)");
  GPT_CHECK(sc.momentum_cooldown_steps <= total_steps_, "schedule: schedule.momentum_cooldown_steps exceeds the run");
}

void Schedule::check_step(int64_t step, bool allow_final) const {
  const int64_t hi = allow_final ? total_steps_ : total_steps_ - 1;
  GPT_CHECK(step >= 0 && step <= hi, "schedule: step ", step, " outside [0, ", hi, "]");
}

int64_t Schedule::stage_begin(int stage) const {
  GPT_CHECK(stage >= 0 && stage < num_stages(), "schedule: stage ", stage, " outside [0, ", num_stages(), ")");
  return begins_[static_cast<size_t>(stage)];
}
int64_t Schedule::stage_end(int stage) const {
  GPT_CHECK(stage >= 0 && stage < num_stages(), "schedule: stage ", stage, " outside [0, ", num_stages(), ")");
  return ends_[static_cast<size_t>(stage)];
}

int Schedule::stage_of(int64_t step) const {
  check_step(step, true);
  for (int i = 0; i < num_stages(); ++i) {
    if (step < ends_[static_cast<size_t>(i)]) return i;
  }
  return num_stages() - 1;  // step N
}

int64_t Schedule::slice_tokens(int stage) const {
  return recipe_.schedule.stages[static_cast<size_t>(stage)].batch_tokens / recipe_.slices_per_call;
}
int64_t Schedule::stage_tokens(int stage) const {
  return recipe_.schedule.stages[static_cast<size_t>(stage)].batch_tokens * (stage_end(stage) - stage_begin(stage));
}
int64_t Schedule::total_tokens() const {
  int64_t sum = 0;
  for (int i = 0; i < num_stages(); ++i) sum += stage_tokens(i);
  return sum;
}

double Schedule::lr_mult(int64_t step) const {
  check_step(step, true);
  const ScheduleConfig& sc = recipe_.schedule;
  const double lr_mul = sc.stages[static_cast<size_t>(stage_of(step))].lr_mul;
  if (step < cooldown_start_) return lr_mul;
  const double span = static_cast<double>(main_steps_ - cooldown_start_);
  const double t = span > 0 ? std::min(1.0, static_cast<double>(step - cooldown_start_) / span) : 1.0;
  return lr_mul * (1.0 - t) + sc.lr_floor * t;
}

double Schedule::momentum(int64_t step) const {
  check_step(step, true);
  const ScheduleConfig& sc = recipe_.schedule;
  const double lo = sc.momentum_min, hi = sc.momentum_max;
  if (step < sc.momentum_warmup_steps) {
    return lo + (hi - lo) * static_cast<double>(step) / static_cast<double>(sc.momentum_warmup_steps);
  }
  const int64_t cool_from = total_steps_ - sc.momentum_cooldown_steps;
  if (sc.momentum_cooldown_steps > 0 && step > cool_from) {
    return hi - (hi - lo) * static_cast<double>(step - cool_from) / static_cast<double>(sc.momentum_cooldown_steps);
  }
  return hi;
}

double Schedule::stage_fraction(int64_t step, int stage) const {
  if (step >= total_steps_) return 1.0;
  const int64_t a = stage_begin(stage), b = stage_end(stage);
  return static_cast<double>(step - a) / static_cast<double>(b - a);
}

std::vector<double> Schedule::mtp_weights(int64_t step) const {
  const int stage = stage_of(step);
  const StageConfig& st = recipe_.schedule.stages[static_cast<size_t>(stage)];
  const double t = stage_fraction(step, stage);
  std::vector<double> w(st.mtp_start.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = st.mtp_start[i] + (st.mtp_end[i] - st.mtp_start[i]) * t;
  return w;
}

size_t Schedule::stepped_index(int64_t step, int stage, size_t parts) const {
  if (step >= total_steps_) return parts - 1;  // step N: the last stage at t = 1
  const int64_t a = stage_begin(stage), b = stage_end(stage);
  const auto k = static_cast<int64_t>(parts);
  return static_cast<size_t>(std::min(k - 1, k * (step - a) / (b - a)));
}

double Schedule::prefix_weight(int64_t step) const {
  const int stage = stage_of(step);
  const StageConfig& st = recipe_.schedule.stages[static_cast<size_t>(stage)];
  if (!st.prefix_steps.empty()) return st.prefix_steps[stepped_index(step, stage, st.prefix_steps.size())];
  return st.prefix_start + (st.prefix_end - st.prefix_start) * stage_fraction(step, stage);
}

int64_t Schedule::sampled_softmax_size(int64_t step) const {
  const int stage = stage_of(step);    // checks the step
  if (step == total_steps_) return 0;  // validation always uses the full softmax
  const std::vector<int64_t>& sizes = recipe_.schedule.stages[static_cast<size_t>(stage)].sampled_softmax;
  return sizes.empty() ? 0 : sizes[stepped_index(step, stage, sizes.size())];
}

bool Schedule::is_ngram_event(int64_t step) const {
  check_step(step, true);
  const ExtensionsConfig& sd = recipe_.extensions;
  if (sd.ngram_rows == 0 || step == total_steps_) return false;
  if (step < sd.ngram_late_step) return step % 2 == 1;
  return step % sd.ngram_max_cycle_steps == sd.ngram_max_cycle_steps - 1;
}

bool Schedule::logs_training_line(int64_t step) const {
  check_step(step, false);
  return (step + 1) % recipe_.extensions.log_every == 0 || step + 1 >= total_steps_ - 1;
}

bool Schedule::is_validation_step(int64_t step) const {
  check_step(step, true);
  if (step == total_steps_) return true;
  const int64_t every = recipe_.validation.every;
  return every > 0 && step % every == 0;
}

std::vector<int64_t> Schedule::validation_steps() const {
  std::vector<int64_t> out;
  for (int64_t s = 0; s <= total_steps_; ++s) {
    if (is_validation_step(s)) out.push_back(s);
  }
  return out;
}

ValidationWindows Schedule::validation_windows(int64_t step) const {
  check_step(step, true);
  const ScheduleConfig& sc = recipe_.schedule;
  if (step == total_steps_) return {sc.final_ws_short * sc.window_block, sc.final_ws_long * sc.window_block, false};
  const StageConfig& st = sc.stages[static_cast<size_t>(stage_of(step))];
  return {st.ws_short * sc.window_block, st.ws_long * sc.window_block, true};
}

std::vector<YarnEvent> Schedule::yarn_events() const {
  std::vector<YarnEvent> out;
  const ScheduleConfig& sc = recipe_.schedule;
  for (size_t i = 1; i < sc.stages.size(); ++i) {
    const int64_t old_w = sc.stages[i - 1].ws_long, new_w = sc.stages[i].ws_long;
    if (old_w != new_w) out.push_back({begins_[i], old_w * sc.window_block, new_w * sc.window_block});
  }
  return out;
}

std::optional<YarnEvent> Schedule::yarn_event(int64_t step) const {
  for (const YarnEvent& e : yarn_events()) {
    if (e.step == step) return e;
  }
  return std::nullopt;
}

std::vector<int64_t> Schedule::warmup_steps() const {
  if (!recipe_.schedule.warmup) return {};
  if (recipe_.extensions.warmup_list) return seed_warmup_steps();
  std::set<int64_t> steps{0, 1};
  for (int i = 1; i < num_stages(); ++i) {
    for (int64_t d = -2; d <= 1; ++d) steps.insert(begins_[static_cast<size_t>(i)] + d);
  }
  std::vector<int64_t> out;
  for (int64_t s : steps) {
    if (s >= 0 && s < total_steps_) out.push_back(s);
  }
  return out;
}

StepGraphKey Schedule::graph_key(int64_t step) const {
  check_step(step, false);
  const ScheduleConfig& sc = recipe_.schedule;
  const int stage = stage_of(step);
  const StageConfig& st = sc.stages[static_cast<size_t>(stage)];
  StepGraphKey k;
  k.slice_tokens = slice_tokens(stage);
  k.cu_rows = cu_rows_for(k.slice_tokens) * sc.cu_rows_multiplier;
  k.mtp_weights = static_cast<int64_t>(st.mtp_start.size());
  k.sampled_softmax = sampled_softmax_size(step);
  k.ws_short_blocks = st.ws_short;
  k.ws_long_blocks = st.ws_long;
  k.max_segment = sc.segment_cap > 0 ? std::min(st.lmax, sc.segment_cap) : st.lmax;
  return k;
}

std::vector<int64_t> Schedule::seed_warmup_steps() const {
  std::set<int64_t> steps{0, 1};
  auto add_around = [&](int64_t b) {
    for (int64_t d = -2; d <= 1; ++d) steps.insert(b + d);
  };
  // Every stage start and every change of the sampled-softmax size.
  for (int i = 1; i < num_stages(); ++i) add_around(begins_[static_cast<size_t>(i)]);
  for (int64_t s = 1; s < total_steps_; ++s) {
    if (sampled_softmax_size(s) != sampled_softmax_size(s - 1)) add_around(s);
  }
  // The first Adam steps after the embed split (a new optimizer path for embed).
  for (int64_t d = 1; d <= 3; ++d) steps.insert(split_step_ + d);
  // Each step-graph configuration's first visit (capture) and the next step (self-check).
  std::set<StepGraphKey> seen;
  for (int64_t s = 0; s < total_steps_; ++s) {
    if (seen.insert(graph_key(s)).second) {
      steps.insert(s);
      steps.insert(s + 1);
    }
  }
  std::vector<int64_t> out;
  for (int64_t s : steps) {
    if (s >= 0 && s < total_steps_) out.push_back(s);
  }
  GPT_CHECK(out.size() <= kMaxSeedWarmupSteps, "schedule: the §S.10 warmup of recipe '", recipe_.name, "' needs ",
            out.size(), " steps, more than ", kMaxSeedWarmupSteps,
            " (too many stage starts, sampled-softmax changes or step configurations)");
  return out;
}

int64_t Schedule::cu_rows_for(int64_t slice_tokens) {
  if (slice_tokens == 16384) return 64;
  if (slice_tokens == 32768) return 96;
  if (slice_tokens == 40960) return 128;  // §S.1 taper
  if (slice_tokens == 49152) return 128;
  const int64_t per300 = slice_tokens / 300;
  // [project definition] at least 128 rows, also for slices shorter than 300 tokens.
  return std::max<int64_t>(128, 128 * ((per300 + 127) / 128));
}

StepSchedule Schedule::at(int64_t step) const {
  check_step(step, true);
  const ScheduleConfig& sc = recipe_.schedule;
  StepSchedule r;
  r.step = step;
  r.stage = stage_of(step);
  const StageConfig& st = sc.stages[static_cast<size_t>(r.stage)];
  r.stage_begin = stage_begin(r.stage);
  r.stage_end = stage_end(r.stage);
  r.batch_tokens = st.batch_tokens;
  r.slice_tokens = slice_tokens(r.stage);
  r.cu_rows = cu_rows_for(r.slice_tokens) * sc.cu_rows_multiplier;
  r.lmax = st.lmax;
  const bool final_validation = step == total_steps_;
  r.ws_short_blocks = final_validation ? sc.final_ws_short : st.ws_short;
  r.ws_long_blocks = final_validation ? sc.final_ws_long : st.ws_long;
  r.ws_short_tokens = r.ws_short_blocks * sc.window_block;
  r.ws_long_tokens = r.ws_long_blocks * sc.window_block;
  r.lr_mult = lr_mult(step);
  r.mtp_weights = mtp_weights(step);
  r.prefix_weight = prefix_weight(step);
  r.momentum = momentum(step);
  r.adam_step = is_adam_step(step);
  r.tied = step <= split_step_;
  r.split_step = step == split_step_;
  r.validation = is_validation_step(step);
  r.sampled_softmax = sampled_softmax_size(step);
  r.ngram_event = is_ngram_event(step);
  r.segment_cap = sc.segment_cap;
  r.log_line = !final_validation && logs_training_line(step);
  return r;
}

}  // namespace gpt
