#include "trainer/data/call_prefetcher.h"

#include <utility>

namespace gpt {

CallPrefetcher::CallPrefetcher(TrainLoader loader) : loader_(std::move(loader)), taken_position_(loader_.position()) {}

CallPrefetcher::~CallPrefetcher() {
  // The background call reads the loader: it must end before the loader does. Its error, if any, is nobody's now.
  if (pending_.valid()) pending_.wait();
}

void CallPrefetcher::prefetch(const CallShape& shape) {
  if (pending_shape_ == shape) return;
  finish_pending(/*discard=*/true);
  pending_shape_ = shape;
  // Only this thread touches the loader until the future is collected: take() and prefetch() wait for it first.
  pending_ = std::async(std::launch::async, [this, shape] {
    Built built;
    built.batches = loader_.next(shape);
    built.after = loader_.position();
    return built;
  });
}

std::optional<CallPrefetcher::Built> CallPrefetcher::finish_pending(bool discard) {
  if (!pending_.valid()) return std::nullopt;
  pending_shape_.reset();
  if (discard) {
    // Let the call end (its error included: nothing consumed it), then put the loader back where it started.
    pending_.wait();
    pending_ = {};
    loader_.seek(taken_position_);
    return std::nullopt;
  }
  return pending_.get();  // rethrows the loader's error at the call that would have made it
}

std::vector<Microbatch> CallPrefetcher::take(const CallShape& shape) {
  const bool matches = pending_shape_ == shape;
  if (std::optional<Built> built = finish_pending(/*discard=*/!matches)) {
    ++prefetched_calls_;
    taken_position_ = built->after;
    return std::move(built->batches);
  }
  ++direct_calls_;
  std::vector<Microbatch> batches = loader_.next(shape);
  taken_position_ = loader_.position();
  return batches;
}

}  // namespace gpt
