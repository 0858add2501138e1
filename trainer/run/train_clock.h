#pragma once
// The training clock of the run loop (RECIPE §9.2).
#include <chrono>
#include <functional>
#include <utility>

namespace gpt {

// Accumulated wall-clock time of the timed region (§9.2). `sync` waits for the device before reading the
// clock (a no-op on the CPU; the CUDA backend synchronizes its stream).
class TrainClock {
 public:
  explicit TrainClock(std::function<void()> sync) : sync_(std::move(sync)) {}
  void start() {
    sync_();
    t0_ = std::chrono::steady_clock::now();
    running_ = true;
  }
  void stop() {
    if (!running_) return;
    sync_();
    accumulated_ms_ += since_start();
    running_ = false;
  }
  // Accumulated time plus the unsynchronized elapsed time of the running segment (§9.3 training lines).
  double elapsed_ms() const { return accumulated_ms_ + (running_ ? since_start() : 0.0); }
  void set_accumulated(double ms) { accumulated_ms_ = ms; }

 private:
  double since_start() const {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count();
  }
  std::function<void()> sync_;
  std::chrono::steady_clock::time_point t0_{};
  double accumulated_ms_ = 0;
  bool running_ = false;
};

}  // namespace gpt
