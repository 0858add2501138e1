#include "harness/record/sweep_runner.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>

#include "harness/launcher/safe_files.h"
#include "base/check.h"

namespace gpt::harness {

namespace {

volatile std::sig_atomic_t g_stop_requested = 0;
using SignalHandler = void (*)(int);
SignalHandler g_previous_int = SIG_DFL;
SignalHandler g_previous_term = SIG_DFL;
extern "C" void on_stop_signal(int) { g_stop_requested = 1; }

std::string format_duration(double seconds) {
  if (!(seconds >= 0)) return "?";
  const long long s = static_cast<long long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, (s / 60) % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%llds", s);
  }
  return buf;
}

// Follows a growing log file and remembers its latest validation loss, for the progress line.
class LogTail {
 public:
  explicit LogTail(std::filesystem::path path) : path_(std::move(path)) {}
  std::optional<double> latest_val_loss() {
    std::ifstream in(path_, std::ios::binary);
    if (!in) return latest_;
    in.seekg(static_cast<std::streamoff>(offset_));
    std::string chunk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    offset_ += chunk.size();
    pending_ += chunk;
    size_t nl;
    while ((nl = pending_.find('\n')) != std::string::npos) {
      if (auto step = parse_step_line(std::string_view(pending_).substr(0, nl)); step && step->val_loss) {
        latest_ = step->val_loss;
      }
      pending_.erase(0, nl + 1);
    }
    if (pending_.size() > 65536) pending_.clear();  // a pathological line without newline
    return latest_;
  }

 private:
  std::filesystem::path path_;
  size_t offset_ = 0;
  std::string pending_;
  std::optional<double> latest_;
};

struct Slot {
  const RunPlan* plan = nullptr;
  std::optional<Process> process;
  std::optional<LogTail> tail;
};

class Progress {
 public:
  Progress(const SweepRunOptions& o, int total, int parallel)
      : out_(o.progress), tty_(o.progress_is_tty), total_(total), parallel_(parallel) {}

  void finished(const RunRecord& r, int done) {
    done_ = done;
    wall_sum_ += r.wall_time_s.value_or(0);
    if (!out_) return;
    clear_bar();
    std::ostringstream line;
    line << "[" << done << "/" << total_ << "] seed " << (r.seed ? std::to_string(*r.seed) : "-") << " "
         << to_string(r.status);
    if (r.final_val_loss) line << "  val_loss " << fixed4(*r.final_val_loss);
    if (r.train_time_ms) line << "  train_time " << static_cast<long long>(*r.train_time_ms) << "ms";
    if (!r.reason.empty()) line << "  (" << r.reason << ")";
    if (done < total_) line << "  ETA " << format_duration(eta());
    *out_ << line.str() << "\n";
    out_->flush();
  }

  void tick(std::optional<double> latest_loss, int running) {
    if (!out_ || !tty_) return;
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? done_ * kWidth / total_ : 0;
    std::string bar = "\r[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "] " +
                      std::to_string(done_) + "/" + std::to_string(total_) + " done, " + std::to_string(running) +
                      " running";
    if (latest_loss) bar += ", latest val_loss " + fixed4(*latest_loss);
    if (done_ > 0) bar += ", ETA " + format_duration(eta());
    *out_ << bar << "\x1b[K";
    out_->flush();
    bar_shown_ = true;
  }

  void end() { clear_bar(); }

 private:
  static std::string fixed4(double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", x);
    return buf;
  }
  double eta() const {
    if (done_ == 0) return -1;
    return wall_sum_ / done_ * (total_ - done_) / std::max(1, parallel_);
  }
  void clear_bar() {
    if (bar_shown_ && out_) *out_ << "\r\x1b[K";
    bar_shown_ = false;
  }
  std::ostream* out_;
  bool tty_;
  int total_, parallel_;
  int done_ = 0;
  double wall_sum_ = 0;
  bool bar_shown_ = false;
};

}  // namespace

InterruptGuard::InterruptGuard() {
  g_stop_requested = 0;
  g_previous_int = std::signal(SIGINT, on_stop_signal);
  g_previous_term = std::signal(SIGTERM, on_stop_signal);
}
InterruptGuard::~InterruptGuard() {
  std::signal(SIGINT, g_previous_int == SIG_ERR ? SIG_DFL : g_previous_int);
  std::signal(SIGTERM, g_previous_term == SIG_ERR ? SIG_DFL : g_previous_term);
}
bool InterruptGuard::requested() { return g_stop_requested != 0; }
void InterruptGuard::request() { g_stop_requested = 1; }
void InterruptGuard::clear() { g_stop_requested = 0; }

std::vector<std::string> device_partitions(int slots, int gpus_per_run, const char* visible_devices) {
  GPT_CHECK(slots >= 1, "--parallel must be at least 1, got ", slots);
  GPT_CHECK(gpus_per_run >= 1, "--gpus must be at least 1, got ", gpus_per_run);
  std::vector<std::string> devices;
  // Set but empty: the user hid every GPU. Each run gets that same empty list, never devices 0, 1, ... the user
  // did not give (a CPU sweep runs as asked; a GPU trainer finds no device and says so).
  if (visible_devices != nullptr && *visible_devices == '\0') return std::vector<std::string>(slots, "");
  if (visible_devices != nullptr) {
    std::stringstream in(visible_devices);
    std::string id;
    while (std::getline(in, id, ',')) {
      if (!id.empty()) devices.push_back(id);
    }
  } else {
    for (int i = 0; i < slots * gpus_per_run; ++i) devices.push_back(std::to_string(i));
  }
  GPT_CHECK(static_cast<int>(devices.size()) >= slots * gpus_per_run, "--parallel ", slots, " x --gpus ", gpus_per_run,
            " needs ", slots * gpus_per_run, " devices but CUDA_VISIBLE_DEVICES lists ", devices.size());
  std::vector<std::string> partitions;
  for (int s = 0; s < slots; ++s) {
    std::string part;
    for (int g = 0; g < gpus_per_run; ++g) part += (g ? "," : "") + devices[static_cast<size_t>(s * gpus_per_run + g)];
    partitions.push_back(part);
  }
  return partitions;
}

SweepRunResult run_sweep(Store& store, std::int64_t sweep_id, const std::vector<RunPlan>& plans,
                         const SweepRunOptions& options) {
  const int parallel = std::max(1, options.parallel);
  GPT_CHECK(options.device_partitions.empty() || static_cast<int>(options.device_partitions.size()) >= parallel,
            "internal: fewer device partitions than parallel slots");
  std::deque<const RunPlan*> queue;
  for (const auto& p : plans) queue.push_back(&p);
  std::vector<Slot> slots(static_cast<size_t>(parallel));
  SweepRunResult result;
  Progress progress(options, static_cast<int>(plans.size()), parallel);
  std::optional<double> latest_loss;

  // Spool first, then insert: a locked database or a killed harness cannot lose a finished run.
  auto keep = [&](const RunPlan& plan, const RunRecord& record) {
    if (!spool_and_store(store, plan.out_dir, record, options.insert_retry)) {
      ++result.spooled;
      if (options.progress) {
        *options.progress << "database still locked: run " << record.run_id << " kept in '"
                          << (plan.out_dir / kSpoolFileName).string() << "'; the next harness command stores it\n";
      }
    }
    ++result.finished;
    progress.finished(record, result.finished);
  };
  auto store_run = [&](Slot& slot, const ExitInfo& exit, RunEnd end) {
    RunRecord record = harvest_run(*slot.plan, exit, end, options.timeout_s);
    record.sweep_id = sweep_id;
    if (!record.environment) record.environment_id = options.environment_id;
    slot.process.reset();
    keep(*slot.plan, record);
    slot.plan = nullptr;
  };

  while (true) {
    const bool stopping = InterruptGuard::requested();
    // Fill free slots.
    for (size_t i = 0; i < slots.size() && !stopping; ++i) {
      Slot& slot = slots[i];
      if (slot.plan != nullptr || queue.empty()) continue;
      slot.plan = queue.front();
      queue.pop_front();
      // A re-run seed (killed earlier) starts a fresh log, once its folder's lock shows nothing runs there.
      LaunchSpec spec{slot.plan->argv, slot.plan->log_path, {}, slot.plan->out_dir / kRunLockFileName, true};
      // Each attempt starts in an empty folder (once its lock shows nothing runs there): what is read back after
      // the run can only be what this run wrote.
      spec.before_start = [out_dir = slot.plan->out_dir] { empty_run_folder(out_dir); };
      spec.environment.emplace_back("SPEEDRUN_SEED", std::to_string(slot.plan->seed));
      spec.environment.emplace_back("SPEEDRUN_RUN_ID", slot.plan->run_id);
      spec.environment.emplace_back("SPEEDRUN_OUT", slot.plan->out_dir.string());
      if (!options.device_partitions.empty())
        spec.environment.emplace_back("CUDA_VISIBLE_DEVICES", options.device_partitions[i]);
      make_folders_below(slot.plan->out_dir.parent_path(), slot.plan->out_dir.filename());
      try {
        slot.process.emplace(Process::start(spec));
        slot.tail.emplace(slot.plan->log_path);
      } catch (const RunFolderBusy& e) {
        // A trainer from an earlier (killed) harness still works in this folder: leave it and its seed alone.
        ++result.busy;
        if (options.progress) *options.progress << "seed " << slot.plan->seed << " not started: " << e.what() << "\n";
        slot.plan = nullptr;
      } catch (const gpt::Error& e) {
        // A program that cannot start is a failed run with the reason, not the end of the sweep.
        RunRecord record;
        record.sweep_id = sweep_id;
        record.arm = slot.plan->arm;
        record.seed = slot.plan->seed;
        record.run_id = slot.plan->run_id;
        record.status = RunStatus::failed;
        record.reason = e.what();
        record.log_path = slot.plan->log_path.string();
        record.environment_id = options.environment_id;
        keep(*slot.plan, record);
        slot.plan = nullptr;
      }
    }
    // Collect finished, timed-out and interrupted runs.
    int running = 0;
    for (Slot& slot : slots) {
      if (slot.plan == nullptr || !slot.process) continue;
      if (auto exit = slot.process->poll()) {
        if (auto l = slot.tail->latest_val_loss()) latest_loss = l;
        store_run(slot, *exit, RunEnd::exited);
      } else if (stopping) {
        store_run(slot, slot.process->terminate(std::chrono::milliseconds(1000)), RunEnd::interrupted);
      } else if (options.timeout_s && slot.process->elapsed_s() > *options.timeout_s) {
        store_run(slot, slot.process->terminate(), RunEnd::timed_out);
      } else {
        ++running;
        if (auto l = slot.tail->latest_val_loss()) latest_loss = l;
      }
    }
    if (stopping) {
      result.interrupted = true;
      break;
    }
    if (running == 0 && queue.empty()) break;
    progress.tick(latest_loss, running);
    std::this_thread::sleep_for(options.poll_interval);
  }
  progress.end();
  return result;
}

}  // namespace gpt::harness
