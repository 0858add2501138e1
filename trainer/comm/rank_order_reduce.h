#pragma once
// The reduction every CPU communicator shares (comm.h): element range [begin, end) of W ranks' buffers, combined
// in rank order 0, 1, …, W−1 in fp32 (double for f64 and integers) and rounded once to the dtype, so that thread
// ranks and MPI processes give bitwise the same result.
#include <cstdint>
#include <vector>

#include "kernels/tensor.h"
#include "trainer/comm/comm.h"

namespace gpt {

// bufs[q] = rank q's buffer (dtype elements); writes end − begin elements to out (which must not alias a range
// another rank is still reading).
void reduce_in_rank_order(DType dtype, const std::vector<const void*>& bufs, int64_t begin, int64_t end, ReduceOp op,
                          void* out);

}  // namespace gpt
