// Every input of tests/fuzz/corpus/<target>/ (seeds and the regression inputs of past findings) through the same
// checks as the libFuzzer targets, in the normal gcc ASan/UBSan build: a fixed finding that comes back fails here
// even where clang is absent. Then one named test per finding, with the defect spelled out.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/error_of.h"
#include "harness/logparse/run_summary.h"
#include "harness/nightly/regression.h"
#include "base/check.h"
#include "base/fnv1a.h"
#include "source_dir.h"
#include "trainer/run/checkpoint.h"

extern "C" {
int replay_tokenizer_input(const uint8_t*, size_t);
int replay_shard_input(const uint8_t*, size_t);
int replay_recipe_input(const uint8_t*, size_t);
int replay_logparse_input(const uint8_t*, size_t);
int replay_run_summary_input(const uint8_t*, size_t);
int replay_benchmark_json_input(const uint8_t*, size_t);
int replay_checkpoint_input(const uint8_t*, size_t);
}

namespace gpt {
namespace {

using Entry = int (*)(const uint8_t*, size_t);

// Runs every corpus file of `target`; returns how many there were.
size_t replay(const std::string& target, Entry entry) {
  const auto dir = std::filesystem::path(SPEEDRUN_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / target;
  size_t files = 0;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(file.path(), std::ios::binary);
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    SCOPED_TRACE(file.path().string());
    EXPECT_EQ(entry(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
    ++files;
  }
  return files;
}

TEST(FuzzCorpusReplay, Tokenizer) { EXPECT_GT(replay("tokenizer", replay_tokenizer_input), 0u); }
TEST(FuzzCorpusReplay, Shard) { EXPECT_GT(replay("shard", replay_shard_input), 0u); }
TEST(FuzzCorpusReplay, Recipe) { EXPECT_GT(replay("recipe", replay_recipe_input), 0u); }
TEST(FuzzCorpusReplay, Logparse) { EXPECT_GT(replay("logparse", replay_logparse_input), 0u); }
TEST(FuzzCorpusReplay, RunSummary) { EXPECT_GT(replay("run_summary", replay_run_summary_input), 0u); }
TEST(FuzzCorpusReplay, BenchmarkJson) { EXPECT_GT(replay("benchmark_json", replay_benchmark_json_input), 0u); }
TEST(FuzzCorpusReplay, Checkpoint) { EXPECT_GT(replay("checkpoint", replay_checkpoint_input), 0u); }

using test::error_of;

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// A checkpoint file holding one tensor "w" of `dtype` and `dims` with no payload, checksummed; returns
// read_checkpoint's error message.
std::string error_reading_checkpoint_with_shape(uint8_t dtype, const std::vector<int64_t>& dims) {
  std::string bytes("GPTCKPT\0", 8);
  put<uint32_t>(bytes, 1);
  put<uint64_t>(bytes, 2);
  bytes += "{}";
  put<uint64_t>(bytes, 1);  // one tensor
  put<uint32_t>(bytes, 1);
  bytes += "w";
  put<uint8_t>(bytes, dtype);
  put<uint8_t>(bytes, static_cast<uint8_t>(dims.size()));
  for (const int64_t d : dims) put<int64_t>(bytes, d);
  put<uint64_t>(bytes, 0);
  put<uint64_t>(bytes, fnv1a64(bytes));
  const auto path = std::filesystem::temp_directory_path() / ("overflow_" + std::to_string(::getpid()) + ".ckpt");
  std::ofstream(path, std::ios::binary) << bytes;
  const std::string msg = error_of([&] { read_checkpoint(path); });
  std::filesystem::remove(path);
  return msg;
}

// Found by checkpoint_fuzz: a tensor whose extents multiply past 2^63 bytes was a signed overflow in shape_numel.
TEST(FuzzRegressions, CheckpointShapeOverflowIsNamed) {
  const std::string msg = error_reading_checkpoint_with_shape(1, {int64_t{1} << 40, int64_t{1} << 40});  // f32
  EXPECT_NE(msg.find("'w' has a shape of more than 2^63 bytes"), std::string::npos) << msg;
}

// Found by checkpoint_fuzz after 162 s: one-byte elements and dims [648518346341353480, 16, 0] need 0 bytes and
// passed the unsigned byte check, but the signed element count overflowed at the second extent (shape_numel).
TEST(FuzzRegressions, CheckpointZeroExtentAfterOverflowingExtentsIsNamed) {
  const std::string msg = error_reading_checkpoint_with_shape(6, {648518346341353480, 16, 0});  // u8
  EXPECT_NE(msg.find("'w' has a shape of more than 2^63 bytes or elements"), std::string::npos) << msg;
}

// Found by run_summary_fuzz: a number beyond double escaped as a bare nlohmann out_of_range exception.
TEST(FuzzRegressions, RunSummaryNumberBeyondDoubleIsNamed) {
  const std::string msg = error_of([] { harness::parse_run_summary(R"({"final_val_loss": 1e400})", "r.json"); });
  EXPECT_NE(msg.find("run summary 'r.json'"), std::string::npos) << msg;
}

// Google Benchmark JSON entries of the wrong type escaped as bare nlohmann type errors.
TEST(FuzzRegressions, BenchmarkJsonWrongTypesAreNamed) {
  using harness::nightly::parse_google_benchmark_json;
  for (const char* text : {R"({"benchmarks": [3]})", R"({"benchmarks": [{"name": 1, "real_time": 2}]})",
                           R"({"benchmarks": [{"name": "a", "real_time": 2, "error_occurred": "yes"}]})",
                           R"({"benchmarks": [{"name": "a", "real_time": 2, "run_type": 7}]})",
                           R"({"benchmarks": [{"name": "a", "real_time": 2, "time_unit": null}]})",
                           R"({"benchmarks": [{"name": "a", "real_time": 1e999}]})"}) {
    const std::string msg = error_of([&] { parse_google_benchmark_json(text, "b.json"); });
    EXPECT_NE(msg.find("b.json"), std::string::npos) << text << ": " << msg;
  }
}

}  // namespace
}  // namespace gpt
