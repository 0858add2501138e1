#include "trainer/run/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <string>

#include <gtest/gtest.h>

#include "run_test_util.h"

namespace gpt {
namespace {

std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_bytes(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::vector<NamedTensor> sample_tensors() {
  std::vector<NamedTensor> t;
  t.push_back(
      {"param/a", Tensor::from_floats(std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f}, {2, 3}, DType::f32)});
  t.push_back({"param/b", Tensor::from_floats(std::vector<float>{0.1f, 0.2f}, {2}, DType::bf16)});
  t.push_back({"buffer/c", Tensor::from_doubles(std::vector<double>{1e-300, 42.0}, {2}, DType::f64)});
  Tensor m = Tensor::zeros({3}, DType::u16);
  m.data<uint16_t>()[1] = 0xbeef;
  t.push_back({"bank/x/mantissa", m});
  t.push_back({"empty", Tensor::zeros({0, 4}, DType::f32)});
  return t;
}

class CheckpointFile : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::filesystem::temp_directory_path() /
            ("gpt_ckpt_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + ".ckpt");
    write_checkpoint(path_, {{"next_step", 5}, {"note", "x"}}, sample_tensors());
  }
  void TearDown() override { std::filesystem::remove(path_); }
  void expect_error(const std::string& fragment) {
    try {
      read_checkpoint(path_);
      FAIL() << "expected an error mentioning '" << fragment << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path_.string()), std::string::npos) << e.what();
    }
  }
  std::filesystem::path path_;
};

TEST_F(CheckpointFile, RoundTripsMetadataAndTensorsBitwise) {
  const CheckpointData data = read_checkpoint(path_);
  EXPECT_EQ(data.meta.at("next_step").get<int>(), 5);
  EXPECT_EQ(data.meta.at("note").get<std::string>(), "x");
  const auto expected = sample_tensors();
  ASSERT_EQ(data.tensors.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(data.tensors[i].name, expected[i].name);
    EXPECT_EQ(data.tensors[i].tensor.shape(), expected[i].tensor.shape());
    EXPECT_EQ(data.tensors[i].tensor.dtype(), expected[i].tensor.dtype());
    EXPECT_EQ(std::memcmp(data.tensors[i].tensor.raw(), expected[i].tensor.raw(), expected[i].tensor.nbytes()), 0)
        << expected[i].name;
  }
  EXPECT_FALSE(std::filesystem::exists(path_.string() + ".tmp")) << "no temporary left behind";
}

TEST_F(CheckpointFile, RejectsFlippedPayloadByte) {
  std::string bytes = read_bytes(path_);
  bytes[bytes.size() - 20] ^= 0x01;
  write_bytes(path_, bytes);
  expect_error("checksum");
}

TEST_F(CheckpointFile, RejectsTruncation) {
  std::string bytes = read_bytes(path_);
  write_bytes(path_, bytes.substr(0, bytes.size() / 2));
  expect_error("checksum");  // the checksum covers the whole file, so truncation is caught before parsing
}

TEST_F(CheckpointFile, RejectsBadMagic) {
  std::string bytes = read_bytes(path_);
  bytes[0] = 'X';
  write_bytes(path_, bytes);
  expect_error("not a train_gpt checkpoint");
}

TEST_F(CheckpointFile, RejectsOtherVersion) {
  std::string bytes = read_bytes(path_);
  bytes[8] = 9;  // version field follows the 8-byte magic
  write_bytes(path_, bytes);
  expect_error("format version 9");
}

TEST_F(CheckpointFile, RejectsTinyFile) {
  write_bytes(path_, "GPT");
  expect_error("bad magic");
}

TEST(Checkpoint, MissingFileNamesIt) {
  try {
    read_checkpoint("/nonexistent/dir/x.ckpt");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/x.ckpt"), std::string::npos);
  }
}

// Opening a FIFO for reading waits for a writer: --resume on one must be refused, not hang. Should the reader
// block (as it did), the test opens the FIFO for writing after 2 s, which ends the wait, and fails.
TEST(Checkpoint, FifoIsRefusedWithoutWaiting) {
  const auto fifo = std::filesystem::temp_directory_path() / ("gpt_fifo_" + std::to_string(::getpid()) + ".ckpt");
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto reading = std::async(std::launch::async, [&]() -> std::string {
    try {
      read_checkpoint(fifo);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  });
  const bool answered_at_once = reading.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  if (!answered_at_once) {
    const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (writer >= 0) ::close(writer);
  }
  const std::string msg = reading.get();
  std::filesystem::remove(fifo);
  EXPECT_TRUE(answered_at_once) << "read_checkpoint waited on a FIFO";
  EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
}

TEST(WriteFileAtomically, ReplacesContent) {
  const auto path = std::filesystem::temp_directory_path() / "gpt_atomic_test.json";
  write_file_atomically(path, "first");
  write_file_atomically(path, "second");
  EXPECT_EQ(read_bytes(path), "second");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace gpt
