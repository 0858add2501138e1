// Loading r50k_base.tiktoken: where it is found and how a bad file is reported.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

#include "base/check.h"
#include "tests/tokenizer/tokenizer_test_util.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"
#include "source_dir.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("gpt2_ranks_test_" + std::to_string(::getpid()))) {
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  fs::path write(const std::string& name, const std::string& contents) const {
    const fs::path file = path_ / name;
    std::ofstream(file, std::ios::binary) << contents;
    return file;
  }

 private:
  fs::path path_;
};

// Sets an environment variable for one scope and restores the previous state after it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string real_ranks_text() {
  std::ifstream in(Gpt2Tokenizer::default_ranks_path(), std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// Replaces line `line_number` (1-based) of text with replacement.
std::string replace_line(const std::string& text, int line_number, const std::string& replacement) {
  size_t begin = 0;
  for (int line = 1; line < line_number; ++line) begin = text.find('\n', begin) + 1;
  const size_t end = text.find('\n', begin);
  return text.substr(0, begin) + replacement + text.substr(end);
}

// The message of the gpt::Error that loading path throws ("" when it loads).
std::string load_error(const fs::path& path) {
  try {
    (void)Gpt2Tokenizer::load(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

TEST(RanksFile, MissingFileNamesItAndTheFetchScript) {
  const std::string error = load_error("/nonexistent/r50k_base.tiktoken");
  EXPECT_CONTAINS(error, "/nonexistent/r50k_base.tiktoken");
  EXPECT_CONTAINS(error, "scripts/fetch-tokenizer");
}

TEST(RanksFile, CorruptLinesAreReportedWithFileAndLine) {
  const TempDir dir;
  const std::string real = real_ranks_text();
  struct Case {
    int line;
    std::string replacement;
    std::string expected;
  };
  const Case cases[] = {
      {1000, "not*base64 999", "invalid base64"},
      {3, "Iw==", "expected 'base64 rank'"},
      {17, "Iw== 2 extra", "expected 'base64 rank'"},
      {42, "Kg== 50256", "rank must be an integer in [0, 50256)"},
      {43, "Kg== -1", "rank must be an integer"},
      {44, "Kg== 12x", "rank must be an integer"},
      {50000, "IHRoZQ== 1", "rank 1 appears twice"},
      {50001, "IHRoZQ== 50000", "token bytes of rank 50000 appear twice"},  // " the" is rank 262 already
  };
  for (const Case& c : cases) {
    const fs::path file = dir.write("corrupt.tiktoken", replace_line(real, c.line, c.replacement));
    const std::string error = load_error(file);
    EXPECT_CONTAINS(error, file.string() + ":" + std::to_string(c.line) + ":");
    EXPECT_CONTAINS(error, c.expected);
  }
}

TEST(RanksFile, TruncatedFileIsRejected) {
  const TempDir dir;
  const std::string real = real_ranks_text();
  const fs::path file = dir.write("short.tiktoken", real.substr(0, real.size() / 2 / 8 * 8));
  const std::string error = load_error(file);
  EXPECT_CONTAINS(error, file.string());
  EXPECT_FALSE(error.empty());
  const fs::path first_ten = dir.write("ten.tiktoken", real.substr(0, real.find("Kw== 10\n")));
  EXPECT_CONTAINS(load_error(first_ten), "expected 50256 tokens");
  EXPECT_CONTAINS(load_error(dir.write("empty.tiktoken", "")), "found 0");
}

TEST(RanksFile, RealFileLoadsFromAnyPath) {
  const TempDir dir;
  const fs::path copy = dir.write("copy.tiktoken", real_ranks_text());
  EXPECT_EQ(load_error(copy), "");
  EXPECT_EQ(Gpt2Tokenizer::load(copy).encode_ordinary("Hello world"), (std::vector<int32_t>{15496, 995}));
}

TEST(RanksFile, EnvironmentVariableOverridesTheSourceTreeFile) {
  const fs::path in_source = Gpt2Tokenizer::default_ranks_path();
  {
    const ScopedEnv env("SPEEDRUN_TOKENIZER", "/nonexistent/ranks.tiktoken");
    try {
      (void)Gpt2Tokenizer::default_ranks_path();
      ADD_FAILURE() << "no error for a missing $SPEEDRUN_TOKENIZER file";
    } catch (const Error& e) {
      EXPECT_CONTAINS(e.what(), "SPEEDRUN_TOKENIZER");
      EXPECT_CONTAINS(e.what(), "/nonexistent/ranks.tiktoken");
      EXPECT_CONTAINS(e.what(), "scripts/fetch-tokenizer");
    }
  }
  const TempDir dir;
  const fs::path copy = dir.write("env.tiktoken", "x");
  {
    const ScopedEnv env("SPEEDRUN_TOKENIZER", copy.c_str());
    EXPECT_EQ(Gpt2Tokenizer::default_ranks_path(), copy);
  }
  {
    const ScopedEnv env("SPEEDRUN_TOKENIZER", nullptr);
    EXPECT_EQ(Gpt2Tokenizer::default_ranks_path(), in_source);
    EXPECT_EQ(in_source, fs::path(SPEEDRUN_SOURCE_DIR) / "data/tokenizer/r50k_base.tiktoken");
  }
}

}  // namespace
}  // namespace gpt
