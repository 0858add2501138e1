// cpu_model (base/cpu_model.h): the machine's CPU as /proc/cpuinfo's first "model name" line names it, the one
// string the trainer's run log and the harness's environment probe both report.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "base/cpu_model.h"

namespace gpt {
namespace {

TEST(CpuModel, IsTheFirstModelNameOfProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, first;
  while (first.empty() && std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) first = line;
  }
  if (first.empty()) GTEST_SKIP() << "/proc/cpuinfo names no CPU model here";
  const std::string model = cpu_model();
  EXPECT_FALSE(model.empty());
  EXPECT_NE(model.front(), ' ');
  EXPECT_EQ(model.find(':'), std::string::npos) << model;
  EXPECT_EQ(first.substr(first.size() - model.size()), model) << first;
}

}  // namespace
}  // namespace gpt
