#pragma once
// Column gather and scatter-add of a [d, V] matrix (RECIPE §S.4 sampled softmax: the logits read only the columns
// C of lm_head, and the gradient lands in those columns of lm_head's dense gradient).
//
//   column_gather:       out[r, j] = table[r, columns[j]]            table [d, V] -> out [d, P]
//   column_scatter_add:  table[r, columns[j]] += src[r, j]  (ADDS)   src [d, P] -> table [d, V]
//
// columns: i64 [P] with entries in [0, V). Repeated columns gather repeatedly; in the scatter-add they add in
// order of j (deterministic). Each add is done in the accumulation type and rounded once to the table's dtype.
// table, out and src share one floating dtype and one device. Both backends give the same bits (copies and single
// adds); columns outside [0, V) are an error on the CPU and gather NaN / are skipped on CUDA (checking them would
// make the host wait for the device), as the CUDA embedding gathers do.
#include "kernels/tensor.h"

namespace gpt {

void column_gather(const Tensor& table, const Tensor& columns, Tensor& out);
void column_scatter_add(const Tensor& src, const Tensor& columns, Tensor& table);

namespace cpu {
void column_gather(const Tensor& table, const Tensor& columns, Tensor& out);
void column_scatter_add(const Tensor& src, const Tensor& columns, Tensor& table);
}  // namespace cpu
namespace cuda {
void column_gather(const Tensor& table, const Tensor& columns, Tensor& out);
void column_scatter_add(const Tensor& src, const Tensor& columns, Tensor& table);
}  // namespace cuda

}  // namespace gpt
