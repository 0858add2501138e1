#include "trainer/export/tensor_files.h"

#include <fstream>

#include "base/check.h"

namespace gpt {

using nlohmann::json;

json TensorFiles::write(const std::string& stem, const Tensor& tensor) const {
  Tensor host = tensor.to(Device::cpu);
  if (host.dtype() == DType::f64) host = host.to(DType::f32);
  const DType dtype = host.dtype();
  GPT_CHECK(
      dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::i32 || dtype == DType::i64 || dtype == DType::u16,
      "tensor file ", stem, ": dtype ", dtype_name(dtype), ", expected f32, bf16, i32, i64 or u16");
  const std::string file = stem + "." + dtype_name(dtype);
  const std::filesystem::path path = dir_ / file;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  GPT_CHECK(out.good(), "cannot create '", path.string(), "'");
  out.write(static_cast<const char*>(host.raw()), static_cast<std::streamsize>(host.nbytes()));
  out.close();
  GPT_CHECK(out.good(), "writing '", path.string(), "' failed");
  return {{"file", file}, {"dtype", dtype_name(dtype)}, {"shape", host.shape()}, {"bytes", host.nbytes()}};
}

json TensorFiles::write_batch(const std::string& stem, const Microbatch& mb) const {
  return {{"tokens", mb.inputs.size()},
          {"max_seqlen", mb.max_seqlen},
          {"inputs", write(stem + ".inputs", mb.inputs)},
          {"targets", write(stem + ".targets", mb.targets)},
          {"cu_seqlens", write(stem + ".cu_seqlens", mb.cu_seqlens)},
          {"bigram_ids", write(stem + ".bigram_ids", mb.bigram_ids)},
          {"sign_rows", write(stem + ".sign_rows", mb.sign_rows)}};
}

}  // namespace gpt
