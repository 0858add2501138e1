// The collective watchdog (trainer/comm/collective_watchdog.h) with fake probes: what the NCCL communicator relies on
// to end a rank that waits for a peer that is gone (the CUDA side runs on the device machine).
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "base/check.h"
#include "trainer/comm/collective_watchdog.h"

namespace gpt {
namespace {

using namespace std::chrono_literals;

// Polls `condition` until it holds or `limit` passes (a liveness bound, not a timing claim).
template <typename Condition>
bool eventually(Condition condition, std::chrono::milliseconds limit = 10s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return condition();
}

struct Counters {
  std::atomic<int> aborts{0};
  CollectiveWatchdogHooks hooks() {
    CollectiveWatchdogHooks h;
    h.abort = [this] { ++aborts; };
    return h;
  }
};

TEST(CollectiveWatchdog, AStuckCollectiveIsAbortedOnceAndNamed) {
  Counters counters;
  CollectiveWatchdog watchdog(50ms, counters.hooks(), 5ms);
  watchdog.watch("NCCL all_reduce (rank 1 of 2)", [] { return false; });
  ASSERT_TRUE(eventually([&] { return watchdog.fired().has_value(); }));
  const std::string reason = *watchdog.fired();
  EXPECT_NE(reason.find("NCCL all_reduce (rank 1 of 2) waited"), std::string::npos) << reason;
  EXPECT_NE(reason.find("SPEEDRUN_COLLECTIVE_TIMEOUT_S=0.05 s"), std::string::npos) << reason;
  EXPECT_EQ(counters.aborts.load(), 1);
  try {
    watchdog.throw_if_fired();
    FAIL() << "throw_if_fired did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), reason);
  }
}

TEST(CollectiveWatchdog, CollectivesThatFinishNeverFire) {
  Counters counters;
  CollectiveWatchdog watchdog(2s, counters.hooks(), 1ms);
  std::atomic<int> finished{0};
  for (int i = 0; i < 20; ++i) {
    watchdog.watch("op " + std::to_string(i), [&finished, i] { return finished.load() > i; });
  }
  for (int i = 1; i <= 20; ++i) {
    finished = i;
    std::this_thread::sleep_for(1ms);
  }
  ASSERT_TRUE(eventually([&] { return watchdog.pending() == 0; }));
  EXPECT_FALSE(watchdog.fired().has_value());
  EXPECT_EQ(counters.aborts.load(), 0);
  EXPECT_NO_THROW(watchdog.throw_if_fired());
}

TEST(CollectiveWatchdog, TheOldestPendingCollectiveIsTheOneNamed) {
  Counters counters;
  CollectiveWatchdog watchdog(40ms, counters.hooks(), 2ms);
  watchdog.watch("first", [] { return true; });
  watchdog.watch("second", [] { return false; });
  watchdog.watch("third", [] { return false; });
  ASSERT_TRUE(eventually([&] { return watchdog.fired().has_value(); }));
  EXPECT_EQ(watchdog.fired()->rfind("second waited", 0), 0u) << *watchdog.fired();
  EXPECT_EQ(counters.aborts.load(), 1);  // one abort for the whole communicator
  EXPECT_EQ(watchdog.pending(), 0u);     // nothing left to time after it
}

TEST(CollectiveWatchdog, AnAsynchronousErrorAbortsWithoutWaitingForTheTimeout) {
  Counters counters;
  CollectiveWatchdogHooks hooks = counters.hooks();
  std::atomic<bool> peer_gone{false};
  hooks.async_error = [&]() -> std::optional<std::string> {
    if (!peer_gone) return std::nullopt;
    return std::string("ncclRemoteError: remote process exited or there was a network error");
  };
  CollectiveWatchdog watchdog(1h, std::move(hooks), 2ms);
  watchdog.watch("NCCL reduce_scatter (rank 0 of 4)", [] { return false; });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(watchdog.fired().has_value());  // polled, no error yet
  peer_gone = true;
  ASSERT_TRUE(eventually([&] { return watchdog.fired().has_value(); }));
  const std::string reason = *watchdog.fired();
  EXPECT_NE(reason.find("NCCL reduce_scatter (rank 0 of 4)"), std::string::npos) << reason;
  EXPECT_NE(reason.find("ncclRemoteError"), std::string::npos) << reason;
  EXPECT_EQ(counters.aborts.load(), 1);
}

// The owner throws as soon as it sees the reason, so the reason must not be visible before the communicator is
// aborted: with a slow abort the old order (reason first, abort after) fails here every time.
TEST(CollectiveWatchdog, TheReasonIsVisibleOnlyAfterTheAbortReturned) {
  std::atomic<int> aborts{0};
  CollectiveWatchdogHooks hooks;
  hooks.abort = [&] {
    std::this_thread::sleep_for(100ms);
    ++aborts;
  };
  CollectiveWatchdog watchdog(10ms, std::move(hooks), 1ms);
  watchdog.watch("slow abort", [] { return false; });
  ASSERT_TRUE(eventually([&] { return watchdog.fired().has_value(); }, 10s));
  EXPECT_EQ(aborts.load(), 1);
}

TEST(CollectiveWatchdog, ThreadStartRunsOnTheWatchdogThreadFirst) {
  std::atomic<bool> started{false};
  std::thread::id started_on;
  CollectiveWatchdogHooks hooks;
  hooks.thread_start = [&] {
    started_on = std::this_thread::get_id();
    started = true;
  };
  CollectiveWatchdog watchdog(1s, std::move(hooks));
  ASSERT_TRUE(eventually([&] { return started.load(); }));
  EXPECT_NE(started_on, std::this_thread::get_id());
}

TEST(CollectiveWatchdog, DestructionDropsPendingProbesWithoutAborting) {
  Counters counters;
  {
    CollectiveWatchdog watchdog(1h, counters.hooks(), 1ms);
    watchdog.watch("never finishes", [] { return false; });
    std::this_thread::sleep_for(10ms);
  }  // joins the thread; the test would hang here if it waited for the probe
  EXPECT_EQ(counters.aborts.load(), 0);
}

TEST(CollectiveWatchdog, RejectsANonPositiveTimeoutOrPollInterval) {
  EXPECT_THROW(CollectiveWatchdog(0ms, {}), Error);
  EXPECT_THROW(CollectiveWatchdog(1s, {}, 0ms), Error);
}

// SPEEDRUN_COLLECTIVE_TIMEOUT_S is read by both transports (MPI and NCCL).
class CollectiveTimeoutEnv : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kCollectiveTimeoutVar); }
};

TEST_F(CollectiveTimeoutEnv, DefaultsTo600Seconds) {
  unsetenv(kCollectiveTimeoutVar);
  EXPECT_EQ(collective_timeout_from_env(), std::chrono::milliseconds(600'000));
}

TEST_F(CollectiveTimeoutEnv, ReadsFractionalSeconds) {
  setenv(kCollectiveTimeoutVar, "2.5", 1);
  EXPECT_EQ(collective_timeout_from_env(), std::chrono::milliseconds(2500));
}

TEST_F(CollectiveTimeoutEnv, ABadValueNamesTheVariable) {
  for (const char* bad : {"abc", "0", "-3", "5s"}) {
    setenv(kCollectiveTimeoutVar, bad, 1);
    try {
      (void)collective_timeout_from_env();
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("SPEEDRUN_COLLECTIVE_TIMEOUT_S='" + std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace gpt
