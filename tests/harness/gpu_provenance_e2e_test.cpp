// What a GPU run's trainer reports of where it ran (OUT/ID.json's environment: the GPU's name and UUID, driver,
// CUDA and NCCL versions, clocks, power limit, CPU threads, compiler; the recipe hash) reaches the stored run and
// every report, and the report's Reproduce line names the database it was stored in.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "harness/store/store.h"
#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

// A stand-in for train_gpt on an H100: its step line and a summary as a CUDA run writes it.
const char* const kGpuTrainer = R"sh(loss="3.20$SPEEDRUN_SEED"
echo "step:10/10 val_loss:${loss}000 train_time:1000ms step_avg:100.00ms"
cat > "$SPEEDRUN_OUT/$SPEEDRUN_RUN_ID.json" <<EOF
{"schema_version": 1, "run_id": "$SPEEDRUN_RUN_ID", "status": "ok", "final_val_loss": $loss,
 "train_time_ms": 1000, "steps": 10, "total_steps": 10, "recipe": {"name": "track1", "hash": "9f3c2a71d0e4b85a"},
 "backend": "cuda", "world_size": 1, "git_commit": "abc1234",
 "environment": {"hostname": "gpu-node-7", "cpu": "Intel Xeon Platinum 8480+", "threads": 16, "backend": "cuda",
   "compiler": "GCC 12.2.0", "build_flags": "Release", "git_commit": "abc1234", "git_dirty": false,
   "gpu": "NVIDIA H100 80GB HBM3", "gpu_uuid": "GPU-0a1b2c3d-4e5f-6789-abcd-ef0123456789",
   "driver": "NVIDIA 570.124.06 (CUDA 12.8)", "cuda": "12.8", "nccl": "2.26.2",
   "gpu_clocks": "sm 1980 MHz (max 1980), memory 2619 MHz (max 2619)", "gpu_power_limit": "700 W",
   "world_size": 1, "ranks": [{"rank": 0, "host": "gpu-node-7", "device": "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)"}]}}
EOF
)sh";

TEST_F(RecordE2E, GpuEnvironmentOfTheSummaryIsStoredAndReported) {
  const auto trainer = script("gpu_trainer.sh", kGpuTrainer);
  const Result r = harness({"record", "--runs", "2", "--name", "sweep", "--target", "3.28", "--", trainer.string()});
  ASSERT_EQ(r.code, 0) << r.output;
  {
    Store store = Store::open(db());
    for (const auto& run : runs()) {
      ASSERT_EQ(run.status, RunStatus::ok) << run.reason;
      const auto params = store.params(OwnerKind::run, run.id);
      EXPECT_EQ(params.at("gpu_uuid"), "GPU-0a1b2c3d-4e5f-6789-abcd-ef0123456789");
      EXPECT_EQ(params.at("gpu_power_limit"), "700 W");
      EXPECT_EQ(params.at("threads"), "16");
      EXPECT_EQ(params.at("recipe_hash"), "9f3c2a71d0e4b85a");
      ASSERT_TRUE(run.environment_id);
      const auto env = store.environment(*run.environment_id);
      ASSERT_TRUE(env);
      EXPECT_EQ(env->gpu, "NVIDIA H100 80GB HBM3");
      EXPECT_EQ(env->driver, "NVIDIA 570.124.06 (CUDA 12.8)");
    }
  }
  const auto reports = dir / "reports" / "sweep";
  const std::string md = read_file(reports / "report.md");
  const std::string html = read_file(reports / "report.html");
  for (const std::string shown :
       {"NVIDIA H100 80GB HBM3", "GPU-0a1b2c3d-4e5f-6789-abcd-ef0123456789", "NVIDIA 570.124.06 (CUDA 12.8)",
        "| CUDA | 12.8 |", "| NCCL | 2.26.2 |", "| GPU clocks | sm 1980 MHz (max 1980), memory 2619 MHz (max 2619) |",
        "| GPU power limit | 700 W |", "| threads | 16 |", "| recipe hash | 9f3c2a71d0e4b85a |",
        "| compiler | GCC 12.2.0 |"}) {
    EXPECT_NE(md.find(shown), std::string::npos) << shown << "\n" << md;
  }
  for (const std::string shown : {"<th>GPU UUID</th><td>GPU-0a1b2c3d-4e5f-6789-abcd-ef0123456789</td>",
                                  "<th>GPU power limit</th><td>700 W</td>", "<th>threads</th><td>16</td>",
                                  "<th>recipe hash</th><td>9f3c2a71d0e4b85a</td>", "<th>NCCL</th><td>2.26.2</td>"}) {
    EXPECT_NE(html.find(shown), std::string::npos) << shown;
  }
  const auto json = nlohmann::json::parse(read_file(reports / "report.json"));
  const auto& details = json.at("provenance").at("environments").at(0).at("details");
  EXPECT_EQ(details.at("gpu_uuid"), "GPU-0a1b2c3d-4e5f-6789-abcd-ef0123456789");
  EXPECT_EQ(details.at("threads"), "16");
  // The Reproduce line names the database: repeated from another folder, the sweep goes to the same store.
  EXPECT_NE(html.find("harness --db " + db().string() + " record --runs 2"), std::string::npos) << html;
}

}  // namespace
}  // namespace gpt::harness
