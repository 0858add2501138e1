#pragma once
// Raw little-endian tensor files under one folder, each described for a JSON manifest ({file, dtype, shape, bytes}):
// the format that scripts/reference_lib reads (f32, bf16 as its 16 bits, i32, i64; f64 is written as f32).
// Used by the reference export and the batch dump of the side-by-side run.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/tensor.h"
#include "trainer/data/train_loader.h"

namespace gpt {

class TensorFiles {
 public:
  explicit TensorFiles(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // Writes DIR/STEM.DTYPE; throws gpt::Error naming the file on a write failure or an unsupported dtype.
  nlohmann::json write(const std::string& stem, const Tensor& tensor) const;

  template <typename T>
  nlohmann::json write(const std::string& stem, const std::vector<T>& values) const {
    Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, dtype_of<T>());
    std::copy(values.begin(), values.end(), t.data<T>());
    return write(stem, t);
  }

  // A microbatch's host products (§1.5): inputs, targets, cu_seqlens, bigram ids and sign rows, with its token
  // count and longest segment.
  nlohmann::json write_batch(const std::string& stem, const Microbatch& mb) const;

  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace gpt
