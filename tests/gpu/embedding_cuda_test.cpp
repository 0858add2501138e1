// CUDA embedding / value-embedding / bigram gathers and scatter-add backwards against the CPU reference.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/bigram.h"
#include "kernels/cuda/embedding_variants.h"
#include "kernels/embedding.h"
#include "tests/gpu/ops_cuda_test_util.h"

namespace gpt {
namespace {

using namespace ops_cuda_testing;
using testing::random_tensor;

struct EmbedCase {
  DType dtype;
  int64_t rows, d, tokens, id_range;  // ids drawn from [0, id_range): small ranges force repeated rows
};

class EmbeddingCuda : public ::testing::TestWithParam<EmbedCase> {};

TEST_P(EmbeddingCuda, ForwardAndBackwardMatchCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, d, n, range] = GetParam();
  const Tensor table = random_tensor({rows, d}, dtype, 21);
  const Tensor ids = random_ids(n, 0, range, 22);
  const Tensor dout = random_tensor({n, d}, dtype, 23);
  Tensor out_cpu = Tensor::empty({n, d}, dtype);
  embedding_forward(table, ids, out_cpu);
  Tensor out_gpu = Tensor::empty({n, d}, dtype, Device::cuda);
  poison(out_gpu);
  embedding_forward(gpu(table), gpu(ids), out_gpu);
  EXPECT_EQ(rel_error(out_gpu, out_cpu), 0.0) << "a gather copies exactly";
  for (int version = 1; version <= cuda::kGatherVersions; ++version) {
    poison(out_gpu);
    cuda::embedding_forward_version(gpu(table), gpu(ids), out_gpu, version);
    EXPECT_EQ(rel_error(out_gpu, out_cpu), 0.0) << "gather v" << version;
  }

  Tensor dtable_cpu = random_tensor({rows, d}, dtype, 24);  // backward adds: start from non-zero
  Tensor dtable_gpu = gpu(dtable_cpu), dtable_again = gpu(dtable_cpu), dtable_promoted = gpu(dtable_cpu);
  embedding_backward(dout, ids, dtable_cpu);
  const Tensor dout_g = gpu(dout), ids_g = gpu(ids);
  embedding_backward(dout_g, ids_g, dtable_gpu);
  embedding_backward(dout_g, ids_g, dtable_again);
  cuda::embedding_backward_version(dout_g, ids_g, dtable_promoted, cuda::kPromotedScatter);
  // The public op is the promoted scatter, bit for bit; scatter_rows_cuda_test.cpp bounds each version's rounding
  // against the CPU row by row. Here: the order of a long run's sum may differ from the CPU's (scatter v2), so the
  // comparison is the dtype's tolerance rather than the CPU's bits.
  EXPECT_EQ(dtable_gpu.to_doubles(), dtable_promoted.to_doubles()) << "the public op runs kPromotedScatter";
  EXPECT_LE(rel_error(dtable_gpu, dtable_cpu), tolerance_for(dtype));
  EXPECT_EQ(dtable_gpu.to_doubles(), dtable_again.to_doubles()) << "backward must be deterministic";
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, EmbeddingCuda,
    ::testing::Values(EmbedCase{DType::f64, 70, 24, 300, 40}, EmbedCase{DType::f32, 70, 24, 300, 40},
                      EmbedCase{DType::bf16, 70, 24, 300, 40}, EmbedCase{DType::bf16, 33, 13, 77, 33},
                      EmbedCase{DType::f32, 50304, 768, 2048, 50304}, EmbedCase{DType::bf16, 50304, 768, 16384, 2000},
                      EmbedCase{DType::f32, 50304, 768, 16384, 50304}));

// Ids outside the table (bad input the CPU path refuses) give NaN rows in every gather version, never a read
// outside the table.
TEST(EmbeddingCuda, OutOfRangeIdsGiveNanRowsInEveryVersion) {
  GPT_REQUIRE_CUDA_DEVICE();
  const int64_t rows = 40, d = 768;
  const Tensor table = gpu(random_tensor({rows, d}, DType::bf16, 35));
  const std::vector<int32_t> id_values = {3, -1, 39, 40, 7, 1 << 30, 0};
  Tensor ids = Tensor::empty({static_cast<int64_t>(id_values.size())}, DType::i32);
  for (size_t i = 0; i < id_values.size(); ++i) ids.data<int32_t>()[i] = id_values[i];
  const Tensor ids_g = gpu(ids);
  for (int version = 1; version <= cuda::kGatherVersions; ++version) {
    Tensor out = Tensor::zeros({ids.numel(), d}, DType::bf16, Device::cuda);
    cuda::embedding_forward_version(table, ids_g, out, version);
    const std::vector<double> got = out.to_doubles(), want = table.to_doubles();
    for (size_t t = 0; t < id_values.size(); ++t) {
      const bool valid = id_values[t] >= 0 && id_values[t] < rows;
      for (int64_t c = 0; c < d; ++c) {
        const double v = got[t * d + c];
        if (valid) {
          ASSERT_EQ(v, want[id_values[t] * d + c]) << "v" << version << " token " << t;
        } else {
          ASSERT_TRUE(std::isnan(v)) << "v" << version << " token " << t;
        }
      }
    }
  }
}

TEST(EmbeddingCuda, ValuePlaneTouchesOnlyItsRows) {
  GPT_REQUIRE_CUDA_DEVICE();
  const int64_t vocab = 50, d = 16, planes = 3, n = 64;
  const Tensor table = random_tensor({planes * vocab, d}, DType::bf16, 31);
  const Tensor ids = random_ids(n, 0, vocab, 32);
  const Tensor dout = random_tensor({n, d}, DType::bf16, 33);
  Tensor out_cpu = Tensor::empty({n, d}, DType::bf16), out_gpu = Tensor::empty({n, d}, DType::bf16, Device::cuda);
  poison(out_gpu);
  value_embedding_forward(table, ids, 2, out_cpu, vocab);
  value_embedding_forward(gpu(table), gpu(ids), 2, out_gpu, vocab);
  EXPECT_EQ(rel_error(out_gpu, out_cpu), 0.0);
  Tensor dt_cpu = random_tensor({planes * vocab, d}, DType::bf16, 34), dt_gpu = gpu(dt_cpu);
  value_embedding_backward(dout, ids, 1, dt_cpu, vocab);
  value_embedding_backward(gpu(dout), gpu(ids), 1, dt_gpu, vocab);
  // 64 tokens: two chunks of the scatter plan; a run that crosses them is summed in two pieces (dtype tolerance).
  EXPECT_LE(rel_error(dt_gpu, dt_cpu), tolerance_for(DType::bf16));
  for (int64_t plane : {0, 2}) {  // the other planes' rows keep their bits
    EXPECT_EQ(dt_gpu.slice(plane * vocab, (plane + 1) * vocab).to_doubles(),
              dt_cpu.slice(plane * vocab, (plane + 1) * vocab).to_doubles())
        << "plane " << plane;
  }
}

class BigramCuda : public ::testing::TestWithParam<EmbedCase> {};

TEST_P(BigramCuda, ForwardAndBackwardMatchCpu) {
  GPT_REQUIRE_CUDA_DEVICE();
  const auto [dtype, rows, d, n, range] = GetParam();
  const int64_t sign_rows = 17;
  const Tensor embed = random_tensor({rows, d}, dtype, 41);
  std::vector<double> signs(static_cast<size_t>(sign_rows * d));
  for (size_t i = 0; i < signs.size(); ++i) signs[i] = ((i * 2654435761u) >> 7) % 2 == 0 ? 1.0 : -1.0;
  const Tensor sign = Tensor::from_doubles(signs, {sign_rows, d}, dtype);
  const Tensor ids = random_ids(n, 0, range, 42), sign_ids = random_ids(n, 0, sign_rows, 43);
  Tensor out_cpu = Tensor::empty({n, d}, dtype), out_gpu = Tensor::empty({n, d}, dtype, Device::cuda);
  poison(out_gpu);
  bigram_forward(embed, sign, ids, sign_ids, out_cpu);
  bigram_forward(gpu(embed), gpu(sign), gpu(ids), gpu(sign_ids), out_gpu);
  EXPECT_EQ(rel_error(out_gpu, out_cpu), 0.0) << "±1 products are exact";

  const Tensor dout = random_tensor({n, d}, dtype, 44);
  Tensor de_cpu = random_tensor({rows, d}, dtype, 45), de_gpu = gpu(de_cpu);
  bigram_backward(dout, sign, ids, sign_ids, de_cpu);
  bigram_backward(gpu(dout), gpu(sign), gpu(ids), gpu(sign_ids), de_gpu);
  Tensor de_promoted = gpu(random_tensor({rows, d}, dtype, 45));
  cuda::bigram_backward_version(gpu(dout), gpu(sign), gpu(ids), gpu(sign_ids), de_promoted, cuda::kPromotedScatter);
  EXPECT_EQ(de_gpu.to_doubles(), de_promoted.to_doubles()) << "the public op runs kPromotedScatter";
  EXPECT_LE(rel_error(de_gpu, de_cpu), tolerance_for(dtype)) << "summation order of long runs (scatter v2)";
}

INSTANTIATE_TEST_SUITE_P(Shapes, BigramCuda,
                         ::testing::Values(EmbedCase{DType::f64, 60, 24, 200, 30},
                                           EmbedCase{DType::f32, 60, 24, 200, 30},
                                           EmbedCase{DType::bf16, 60, 20, 200, 30},
                                           EmbedCase{DType::bf16, 50304, 768, 8192, 50304}));

}  // namespace
}  // namespace gpt
