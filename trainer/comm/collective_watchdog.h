#pragma once
// A watchdog for collectives that finish asynchronously (NCCL kernels on a CUDA stream): no rank may wait forever
// for a peer that died or went elsewhere (docs/multi-rank.md). Each collective is registered with a completion probe
// (for NCCL, a CUDA event recorded after it); a background thread polls the oldest pending one and, once it has been
// pending longer than the timeout or the error probe reports an asynchronous error, calls `abort` once (NCCL:
// ncclCommAbort, which makes the stuck kernels return) and keeps the reason. The owner calls throw_if_fired() before
// each new collective and after each host wait, so the rank ends with an error that names the operation.
// Timeout: SPEEDRUN_COLLECTIVE_TIMEOUT_S (seconds), default 600 s, the same setting as the MPI communicator's.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace gpt {

inline constexpr const char* kCollectiveTimeoutVar = "SPEEDRUN_COLLECTIVE_TIMEOUT_S";
inline constexpr std::chrono::seconds kDefaultCollectiveTimeout{600};

// The watchdog timeout from SPEEDRUN_COLLECTIVE_TIMEOUT_S (seconds > 0), else the default; throws gpt::Error
// naming the variable for a bad value.
std::chrono::milliseconds collective_timeout_from_env();

struct CollectiveWatchdogHooks {
  // Called on the watchdog thread before its first poll (NCCL: make the rank's CUDA device current).
  std::function<void()> thread_start;
  // An asynchronous error of the transport, if any (NCCL: ncclCommGetAsyncError); empty: none.
  std::function<std::optional<std::string>()> async_error;
  // Ends every pending collective of this rank; called at most once, on the watchdog thread.
  std::function<void()> abort;
};

class CollectiveWatchdog {
 public:
  CollectiveWatchdog(std::chrono::milliseconds timeout, CollectiveWatchdogHooks hooks,
                     std::chrono::milliseconds poll_interval = std::chrono::milliseconds(20));
  ~CollectiveWatchdog();  // stops and joins the thread; pending probes are dropped, not waited for
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Registers collective `op`, issued now; `completed` is polled on the watchdog thread until it returns true.
  void watch(std::string op, std::function<bool()> completed);

  // Why the watchdog aborted, once the abort hook has returned (a caller that sees the reason may rely on the
  // abort having happened); throw_if_fired throws gpt::Error with that reason.
  std::optional<std::string> fired() const;
  void throw_if_fired() const;
  size_t pending() const;

 private:
  struct Pending {
    std::string op;
    std::chrono::steady_clock::time_point issued;
    std::function<bool()> completed;
  };
  void loop();
  void fire(const std::string& reason);

  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds poll_interval_;
  CollectiveWatchdogHooks hooks_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;
  bool firing_ = false;               // set before the abort hook runs: no second abort, no more polling
  std::optional<std::string> fired_;  // published after it returns
  bool stopping_ = false;
  std::thread thread_;  // last: started after every other member exists
};

}  // namespace gpt
