#pragma once
// Which cuBLASLt algorithm the latest gpt::gemm / gemm_fp8 call of this thread ran, and how it was chosen
// (autotuned among the heuristic's candidates, or the heuristic's first answer): for benchmark output and notes.
#include <string>

namespace gpt::cuda {

std::string gemm_selection();

}  // namespace gpt::cuda
