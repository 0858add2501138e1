// base/file_read.h: whole-file reads, binary-safe, with errors that name the file.
#include "base/file_read.h"

#include <gtest/gtest.h>

#include <fstream>
#include <unistd.h>

#include "tests/common/error_of.h"

namespace gpt {
namespace {

class FileReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("base_file_read_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path write(const std::string& name, const std::string& bytes) {
    const auto path = dir_ / name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(FileReadTest, ReadsTextUnchanged) {
  const auto path = write("a.txt", "line one\r\nline two\n");
  EXPECT_EQ(read_file(path), "line one\r\nline two\n");
  EXPECT_EQ(try_read_file(path), std::optional<std::string>("line one\r\nline two\n"));
}

TEST_F(FileReadTest, EmptyFileIsAnEmptyString) {
  const auto path = write("empty", "");
  EXPECT_EQ(read_file(path), "");
  const auto read = try_read_file(path);
  ASSERT_TRUE(read.has_value());
  EXPECT_TRUE(read->empty());
}

TEST_F(FileReadTest, BinaryContentKeepsEveryByte) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  bytes += std::string("\0\0\x1a\xff", 4);  // NULs and ^Z mid-file end nothing
  EXPECT_EQ(read_file(write("all_bytes.bin", bytes)), bytes);
}

TEST_F(FileReadTest, MissingFileErrorNamesWhatAndThePath) {
  const auto path = dir_ / "no_such_file.json";
  EXPECT_FALSE(try_read_file(path).has_value());
  const std::string what = test::error_of([&] { read_file(path, "run summary"); });
  EXPECT_NE(what.find("cannot read run summary '" + path.string() + "' (No such file"), std::string::npos) << what;
}

TEST_F(FileReadTest, DefaultWhatIsFile) {
  const auto path = dir_ / "gone";
  const std::string what = test::error_of([&] { read_file(path); });
  EXPECT_NE(what.find("cannot read file '" + path.string() + "'"), std::string::npos) << what;
}

// Opening a folder succeeds on Linux; reading it fails (EISDIR). It must not read as an empty file.
TEST_F(FileReadTest, FolderIsAnErrorNotAnEmptyText) {
  EXPECT_FALSE(try_read_file(dir_).has_value());
  const std::string what = test::error_of([&] { read_file(dir_, "log file"); });
  EXPECT_NE(what.find("cannot read log file '" + dir_.string() + "' (Is a directory)"), std::string::npos) << what;
}

}  // namespace
}  // namespace gpt
