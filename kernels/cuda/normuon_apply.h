#pragma once
// The equalizer and cautious update of RECIPE §4.3 steps 4–5 on CUDA (kernels/cuda/normuon.cu), shared by NorMuon
// and ANVIL (§S.8) as kernels/cpu/normuon_apply.h shares them on the CPU: the decay gate is the update U itself
// (decay_gate == nullptr: NorMuon) or a tensor of the state dtype shaped like param (ANVIL's slow rail).
#include "kernels/normuon.h"
#include "kernels/tensor.h"

namespace gpt::cuda {

void equalize_and_update(const Tensor& x, Tensor& second_moment, Tensor& param, Tensor& mantissa,
                         const NorMuonArgs& args, const Tensor* decay_gate);

}  // namespace gpt::cuda
