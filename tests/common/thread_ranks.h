#pragma once
// W thread ranks of one ThreadRankGroup running the same body, as the CPU tests of sharded code do:
//   test::run_thread_ranks(world, [&](int rank, Comm& comm) { ... });
// starts one thread per rank, joins them all, then rethrows the lowest rank's exception, if any (so a failed
// ASSERT-free check inside a rank surfaces as the test's own failure).
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

#include "trainer/comm/comm.h"

namespace gpt::test {

template <typename Body>
void run_thread_ranks(int world, Body&& body) {
  ThreadRankGroup group(world);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(world));
  for (int rank = 0; rank < world; ++rank) {
    threads.emplace_back([&, rank, comm = group.comm(rank)] {
      try {
        body(rank, *comm);
      } catch (...) {
        errors[static_cast<size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace gpt::test
