// cuTensorMapEncodeTiled through cudaGetDriverEntryPointByVersion (kernels/cuda/tensor_map.h).
#include "kernels/cuda/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "base/check.h"
#include "kernels/cuda/cuda_check.h"

namespace gpt::cuda {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* entry = nullptr;
    cudaDriverEntryPointQueryResult found{};
    GPT_CUDA_CHECK(
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &found));
    GPT_CHECK(found == cudaDriverEntryPointSuccess && entry != nullptr,
              "the CUDA driver has no cuTensorMapEncodeTiled (TMA needs driver ≥ 12.0)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  }();
  return fn;
}

// [tokens, heads, 128] elements of `element_bytes`, boxes of `box_cols` columns (box_cols · element_bytes = 128: one
// swizzled row) × one head × `box_rows` tokens.
CUtensorMap encode_head_rows(CUtensorMapDataType type, int64_t element_bytes, int64_t box_cols, const void* base,
                             int64_t tokens, int heads, int box_rows, const char* what) {
  constexpr int64_t kHeadDim = 128;
  GPT_CHECK(tma_aligned(base), what, ": TMA needs a 16-byte aligned base address");
  GPT_CHECK(tokens > 0 && heads > 0 && box_rows > 0 && box_rows <= 256, what, ": bad tensor-map shape (tokens ", tokens,
            ", heads ", heads, ", box rows ", box_rows, ")");
  const cuuint64_t dims[3] = {kHeadDim, static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(tokens)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(kHeadDim * element_bytes),
                                 static_cast<cuuint64_t>(heads * kHeadDim * element_bytes)};  // bytes, dims 1, 2
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_cols), 1, static_cast<cuuint32_t>(box_rows)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  CUtensorMap map{};
  const CUresult rc = encode_tiled()(&map, type, 3, const_cast<void*>(base), dims, strides, box, element_strides,
                                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                     CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  GPT_CHECK(rc == CUDA_SUCCESS, what, ": cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(rc), ")");
  return map;
}

}  // namespace

CUtensorMap head_rows_tensor_map(const void* base, int64_t tokens, int heads, int box_rows, const char* what) {
  return encode_head_rows(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, 64, base, tokens, heads, box_rows, what);
}

CUtensorMap head_rows_tensor_map_f32(const void* base, int64_t tokens, int heads, int box_rows, const char* what) {
  return encode_head_rows(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, 32, base, tokens, heads, box_rows, what);
}

}  // namespace gpt::cuda
