#pragma once
// The next loader call built on a background thread while the current step runs, so that the host products of a
// step (§1.3-§1.5: slice plans, cu_seqlens, bigram ids and sign rows, the §S.2 n-gram rows) cost the step nothing.
//
// The calls and their order are exactly those of the wrapped TrainLoader: `take(shape)` returns what
// `loader.next(shape)` would have returned at that point. The run asks for the next call as soon as it knows the
// next step's shape (`prefetch(next_shape)`); a `take` whose shape differs from the prefetched one (a stage change
// the caller did not announce) discards nothing: the prefetched call is the next one the loader plans in either
// case, so it is rebuilt for the new shape from the same starting position.
//
// position() is where the loader stands after the calls taken so far (what a checkpoint saves), never after a call
// only prefetched. An error of a prefetched call (a corrupt shard, the last shard run out) is thrown by the take
// that would have made the call, with the loader's own message.
#include <future>
#include <optional>
#include <vector>

#include "trainer/data/train_loader.h"

namespace gpt {

class CallPrefetcher {
 public:
  explicit CallPrefetcher(TrainLoader loader);
  CallPrefetcher(const CallPrefetcher&) = delete;
  CallPrefetcher& operator=(const CallPrefetcher&) = delete;
  ~CallPrefetcher();

  // Starts building the next call for `shape` in the background (a no-op when one is already prefetched for it).
  void prefetch(const CallShape& shape);
  // This rank's microbatches of the next call (the prefetched one when its shape matches).
  std::vector<Microbatch> take(const CallShape& shape);

  LoaderPosition position() const { return taken_position_; }
  // TrainLoader::passes_begun of the calls taken so far.
  std::int64_t passes_begun() const { return taken_position_.pass + 1; }
  // Calls served from a prefetch / built in take because none matched (for the run log's diagnostics and tests).
  int64_t prefetched_calls() const { return prefetched_calls_; }
  int64_t direct_calls() const { return direct_calls_; }

 private:
  struct Built {
    std::vector<Microbatch> batches;
    LoaderPosition after;
  };
  // Waits for the background call, leaving the loader where that call started when `discard`.
  std::optional<Built> finish_pending(bool discard);

  TrainLoader loader_;
  LoaderPosition taken_position_;
  std::optional<CallShape> pending_shape_;
  std::future<Built> pending_;
  int64_t prefetched_calls_ = 0;
  int64_t direct_calls_ = 0;
};

}  // namespace gpt
