// The reference-check export on CUDA, where the banks are bf16 (§0.4): each bank written after an optimizer step
// carries its NorMuon mantissa (§4.3), so that the check can compare the optimizer's fp32 values instead of weights
// that round most of one step's update away.
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../run/run_test_util.h"
#include "trainer/tools/reference_export.h"

namespace gpt {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<uint16_t> read_u16(const fs::path& dir, const json& entry) {
  const fs::path path = dir / entry.at("file").get<std::string>();
  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  std::vector<uint16_t> out(bytes.size() / 2);
  std::memcpy(out.data(), bytes.data(), out.size() * 2);
  return out;
}

float fp32_of(uint16_t high, uint16_t low) {
  const uint32_t bits = (static_cast<uint32_t>(high) << 16) | low;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

TEST(ReferenceExportCuda, BanksAfterEachStepCarryTheirMantissa) {
  test::RunScratch scratch;
  ReferenceExportOptions o;
  o.run.recipe = "tiny";
  // The CUDA attention kernel takes the recipe's head dimension only (128): `tiny` widened to 6 × 128.
  o.run.overrides = {"model.bigram_rows=4096", "model.model_dim=768", "model.head_dim=128", "model.init_bound=0.03125"};
  o.run.backend = "cuda";
  o.run.data_dir = scratch.data();
  o.run.seed = 5;
  o.run.out_dir = scratch.out();
  o.validation_tokens = 64;
  o.steps = {8};
  o.microbatches = 1;
  const fs::path manifest_path = write_reference_export(o);
  const json manifest = json::parse(std::ifstream(manifest_path));
  const fs::path dir = manifest_path.parent_path();
  const json& draw = manifest.at("steps").at(0).at("microbatches").at(0);
  int banks = 0;
  for (const char* key : {"after_even", "after_odd"}) {
    for (const json& entry : draw.at(key).at("tensors")) {
      const std::string name = entry.at("name");
      const bool bank = name == "qk_bank" || name == "vo_bank" || name == "mlp_bank";
      ASSERT_EQ(entry.contains("mantissa"), bank) << key << " " << name;
      if (!bank) continue;
      ++banks;
      const json& mantissa = entry.at("mantissa");
      EXPECT_EQ(mantissa.at("dtype"), "u16") << name;
      EXPECT_EQ(mantissa.at("shape"), entry.at("shape")) << name;
      // The fp32 value splits into the bf16 weight (its high half) and a mantissa that is not all zero: the
      // update left bits below the bf16 step.
      const std::vector<uint16_t> high = read_u16(dir, entry), low = read_u16(dir, mantissa);
      ASSERT_EQ(high.size(), low.size()) << name;
      size_t nonzero = 0;
      for (size_t i = 0; i < low.size(); ++i) {
        nonzero += low[i] != 0;
        ASSERT_TRUE(std::isfinite(fp32_of(high[i], low[i]))) << name << " at " << i;
      }
      EXPECT_GT(nonzero, low.size() / 4) << key << " " << name;
    }
  }
  EXPECT_EQ(banks, 6);  // three banks after each of the two steps
}

}  // namespace
}  // namespace gpt
