#pragma once
// A fresh folder under the system temp dir, removed with everything in it when the test ends.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace gpt::harness::testing {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "harness-";
    if (info != nullptr) name += std::string(info->name()) + "-";
    path_ = std::filesystem::temp_directory_path() / (name + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& leaf) const { return path_ / leaf; }

  std::filesystem::path write(const std::string& leaf, const std::string& text) const {
    const auto file = path_ / leaf;
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << text;
    return file;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace gpt::harness::testing
