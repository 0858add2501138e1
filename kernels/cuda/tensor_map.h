#pragma once
// TMA descriptors (CUtensorMap) for the attention kernels' tiles, made through the driver's
// cuTensorMapEncodeTiled (looked up once through the runtime, so nothing links libcuda directly).
#include <cuda.h>

#include <cstdint>

namespace gpt::cuda {

// Whether `p` meets the copy engine's 16-byte alignment of a tensor's base address.
inline bool tma_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Rows of one head of a [tokens, heads, 128] bf16 tensor: a box is 64 columns × `box_rows` tokens of one head,
// written in the 128-byte swizzle of kernels/cuda/wgmma.cuh (one slab per box); tokens past the end read as zeros.
// Coordinates: (column 0 or 64, head, token). `what` names the tensor in errors.
CUtensorMap head_rows_tensor_map(const void* base, int64_t tokens, int heads, int box_rows, const char* what);

// The same for a [tokens, heads, 128] f32 tensor: boxes of 32 columns (128 bytes, one swizzled row) × `box_rows`
// tokens of one head; coordinates (column 0, 32, 64 or 96, head, token). Stores and reductions skip rows past the end.
CUtensorMap head_rows_tensor_map_f32(const void* base, int64_t tokens, int heads, int box_rows, const char* what);

}  // namespace gpt::cuda
