#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/kernel_version_env.h"

namespace gpt::cuda {
namespace {

TEST(KernelVersionEnv, UnsetOrEmptyMeansThePromotedVersion) {
  EXPECT_EQ(kernel_version_named("SPEEDRUN_X", nullptr, 2, 3), 2);
  EXPECT_EQ(kernel_version_named("SPEEDRUN_X", "", 1, 3), 1);
}

TEST(KernelVersionEnv, NamesEachVersion) {
  EXPECT_EQ(kernel_version_named("SPEEDRUN_X", "v1", 2, 3), 1);
  EXPECT_EQ(kernel_version_named("SPEEDRUN_X", "v3", 2, 3), 3);
  EXPECT_EQ(kernel_version_named("SPEEDRUN_X", "v12", 1, 12), 12);
}

TEST(KernelVersionEnv, AnUnknownNameIsAnErrorNamingTheVariableAndTheVersions) {
  for (const char* bad : {"v0", "v4", "2", "V2", "v2 ", "v-1", "v02", "v+2", "v2x", "v"}) {
    try {
      kernel_version_named("SPEEDRUN_X", bad, 1, 3);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("SPEEDRUN_X='" + std::string(bad) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("v1 to v3"), std::string::npos) << what;
    }
  }
}

TEST(KernelVersionEnv, VersionNumbersOfNames) {
  EXPECT_EQ(kernel_version_number("v1"), 1);
  EXPECT_EQ(kernel_version_number("v12"), 12);
  for (const char* bad : {"", "v", "v0", "v01", "1", "w1", "v1a", "v-1", "v+1", "v99999999999"}) {
    EXPECT_EQ(kernel_version_number(bad), 0) << bad;
  }
}

TEST(KernelVersionEnv, KernelsAreChosenByName) {
  const char* const names[] = {"warp_specialized", "persistent"};
  EXPECT_EQ(kernel_index_named("SPEEDRUN_X", nullptr, names), 0u);
  EXPECT_EQ(kernel_index_named("SPEEDRUN_X", "", names), 0u);
  EXPECT_EQ(kernel_index_named("SPEEDRUN_X", "warp_specialized", names), 0u);
  EXPECT_EQ(kernel_index_named("SPEEDRUN_X", "persistent", names), 1u);
  for (const char* bad : {"v13", "Persistent", "persistent ", "1", "promoted"}) {
    try {
      kernel_index_named("SPEEDRUN_X", bad, names);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("SPEEDRUN_X='" + std::string(bad) + "'"), std::string::npos) << what;
      EXPECT_NE(what.find("known: warp_specialized, persistent"), std::string::npos) << what;
    }
  }
}

TEST(KernelVersionEnv, ReadsTheEnvironment) {
  ::setenv("SPEEDRUN_KERNEL_VERSION_TEST", "v2", 1);
  EXPECT_EQ(kernel_version_from_env("SPEEDRUN_KERNEL_VERSION_TEST", 1, 2), 2);
  ::unsetenv("SPEEDRUN_KERNEL_VERSION_TEST");
  EXPECT_EQ(kernel_version_from_env("SPEEDRUN_KERNEL_VERSION_TEST", 1, 2), 1);
}

}  // namespace
}  // namespace gpt::cuda
