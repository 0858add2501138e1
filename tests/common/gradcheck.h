#pragma once
// Finite-difference helpers for backward tests (fp64 on the CPU backend).
#include <functional>
#include <random>
#include <vector>

#include "kernels/tensor.h"

namespace gpt::testing {

// A tensor of the given shape filled with N(0, scale²) values (deterministic for a seed).
Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double scale = 1.0, Device device = Device::cpu);

// Central differences of a scalar function with respect to every element of `param` (an f64 CPU tensor
// the function reads): returns d f / d param, element by element. `step` is the perturbation.
std::vector<double> numeric_gradient(const std::function<double()>& f, Tensor& param, double step = 1e-6);

// Same, but only at the given flat indices (for large tensors).
std::vector<double> numeric_gradient_at(const std::function<double()>& f, Tensor& param,
                                        const std::vector<int64_t>& indices, double step = 1e-6);

// Σ a_i·b_i in double: turns an output into a scalar loss with random weights.
double dot(const Tensor& a, const Tensor& b);

// max_i |a_i − b_i| / max(max_i |b_i|, floor): one number to compare gradients or outputs.
double max_relative_error(const std::vector<double>& a, const std::vector<double>& b, double floor = 1e-12);

}  // namespace gpt::testing
