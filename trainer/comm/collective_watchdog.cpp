#include "trainer/comm/collective_watchdog.h"

#include <charconv>
#include <sstream>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "base/check.h"

namespace gpt {

std::chrono::milliseconds collective_timeout_from_env() {
  const char* text = std::getenv(kCollectiveTimeoutVar);
  if (text == nullptr || *text == '\0') return kDefaultCollectiveTimeout;
  double seconds = 0;
  const char* end = text + std::string_view(text).size();
  const auto [ptr, ec] = std::from_chars(text, end, seconds);
  GPT_CHECK(ec == std::errc() && ptr == end && seconds > 0, "environment variable ", kCollectiveTimeoutVar, "='", text,
            "' should be a number of seconds > 0");
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

CollectiveWatchdog::CollectiveWatchdog(std::chrono::milliseconds timeout, CollectiveWatchdogHooks hooks,
                                       std::chrono::milliseconds poll_interval)
    : timeout_(timeout), poll_interval_(poll_interval), hooks_(std::move(hooks)) {
  GPT_CHECK(timeout_.count() > 0, "CollectiveWatchdog: the timeout must be > 0 ms, got ", timeout_.count());
  GPT_CHECK(poll_interval_.count() > 0, "CollectiveWatchdog: the poll interval must be > 0 ms, got ",
            poll_interval_.count());
  thread_ = std::thread([this] { loop(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void CollectiveWatchdog::watch(std::string op, std::function<bool()> completed) {
  {
    std::lock_guard lock(mutex_);
    pending_.push_back({std::move(op), std::chrono::steady_clock::now(), std::move(completed)});
  }
  wake_.notify_all();
}

std::optional<std::string> CollectiveWatchdog::fired() const {
  std::lock_guard lock(mutex_);
  return fired_;
}

void CollectiveWatchdog::throw_if_fired() const {
  if (std::optional<std::string> reason = fired()) throw Error(*reason);
}

size_t CollectiveWatchdog::pending() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

void CollectiveWatchdog::fire(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (firing_) return;
    firing_ = true;
    pending_.clear();
  }
  if (hooks_.abort) hooks_.abort();
  std::lock_guard lock(mutex_);
  fired_ = reason;
}

// Collectives complete in issue order on one stream, so only the oldest pending one is timed; the probes run
// without the lock (a CUDA query may take a while), the queue is only touched under it.
void CollectiveWatchdog::loop() {
  if (hooks_.thread_start) hooks_.thread_start();
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (firing_ || pending_.empty()) {
      wake_.wait(lock, [this] { return stopping_ || (!firing_ && !pending_.empty()); });
      continue;
    }
    Pending oldest = pending_.front();
    lock.unlock();
    const bool done = oldest.completed();
    std::optional<std::string> error = hooks_.async_error ? hooks_.async_error() : std::nullopt;
    const auto waited = std::chrono::steady_clock::now() - oldest.issued;
    if (error) {
      fire(oldest.op + ": the communicator reported an asynchronous error (" + *error + "); aborted by the watchdog");
    } else if (!done && waited >= timeout_) {
      std::ostringstream reason;
      reason << oldest.op << " waited " << std::chrono::duration<double>(waited).count()
             << " s for the other ranks and was aborted (watchdog timeout " << kCollectiveTimeoutVar << "="
             << std::chrono::duration<double>(timeout_).count() << " s)";
      fire(reason.str());
    }
    lock.lock();
    if (done && !firing_ && !pending_.empty() && pending_.front().issued == oldest.issued &&
        pending_.front().op == oldest.op) {
      pending_.pop_front();
      continue;  // the next one may be done as well
    }
    wake_.wait_for(lock, poll_interval_, [this] { return stopping_; });
  }
}

}  // namespace gpt
