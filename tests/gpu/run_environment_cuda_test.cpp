// A CUDA run says where it ran: the summary's environment names the GPU (name and UUID), the CUDA driver and
// runtime versions and, in a build with NCCL, NCCL's version, not only ranks[0].device. Reports show "GPU -" when
// these stay empty.
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "../run/run_test_util.h"
#include "trainer/run/backend.h"
#include "trainer/run/run_log.h"
#include "trainer/run/training_run.h"

namespace gpt {
namespace {

using nlohmann::json;

void expect_gpu_fields(const json& environment) {
  for (const char* field : {"gpu", "gpu_uuid", "driver", "cuda", "gpu_clocks"}) {
    ASSERT_TRUE(environment.contains(field)) << field;
    EXPECT_NE(environment.at(field).get<std::string>(), "") << field << " in " << environment.dump();
  }
  EXPECT_EQ(environment.at("gpu_uuid").get<std::string>().rfind("GPU-", 0), 0u) << environment.dump();
#ifdef SPEEDRUN_HAVE_NCCL
  EXPECT_NE(environment.at("nccl").get<std::string>(), "") << environment.dump();
#endif
  EXPECT_NE(environment.at("compiler").get<std::string>(), "");
}

TEST(RunEnvironmentCuda, DescribeGpuFillsTheGpuFields) {
  RunEnvironment env = describe_environment("cuda", 1);
  describe_gpu(Device::cuda, env);
  expect_gpu_fields(env.to_json());
  EXPECT_NE(device_description(Device::cuda).find(env.gpu), std::string::npos) << env.gpu;
}

TEST(RunEnvironmentCuda, SummaryOfACudaRunNamesTheGpu) {
  test::RunScratch scratch;
  RunOptions o = test::short_run(scratch, "gpu-env");
  // The GPT, not the CPU stand-in; the CUDA attention kernel takes the recipe's head dimension only (128).
  o.overrides = test::short_schedule();
  for (const char* set :
       {"model.bigram_rows=4096", "model.model_dim=768", "model.head_dim=128", "model.init_bound=0.03125"}) {
    o.overrides.push_back(set);
  }
  o.backend = "cuda";
  TrainingRun(o).run();
  const json summary = json::parse(std::ifstream(scratch.out() / "gpu-env.json"));
  const json& environment = summary.at("environment");
  expect_gpu_fields(environment);
  EXPECT_EQ(environment.at("ranks").at(0).at("device").get<std::string>().rfind(environment.at("gpu"), 0), 0u)
      << environment.dump();
}

}  // namespace
}  // namespace gpt
