// File rendezvous of the NCCL unique id: publish/wait, waiting before the file exists, timeout, stale files,
// world-size and length mismatches, the environment variables.
#include "trainer/comm/rendezvous.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "base/check.h"

namespace gpt {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

class RendezvousTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "rendezvous-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    options_.dir = fs::path(pattern) / "run";  // publish_blob creates the missing level
    options_.timeout = std::chrono::seconds(10);
    options_.poll = milliseconds(5);
  }
  void TearDown() override { fs::remove_all(options_.dir.parent_path()); }

  static std::vector<std::byte> blob(size_t n, int seed) {
    std::vector<std::byte> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<std::byte>((i * 37 + static_cast<size_t>(seed)) & 0xFF);
    return b;
  }
  static std::string message_of(const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }

  RendezvousOptions options_;
};

TEST_F(RendezvousTest, PublishedBlobIsReadBackExactly) {
  const auto b = blob(128, 1);  // every byte value pattern, including '\n' and 0
  publish_blob(options_, "id", b, 4);
  EXPECT_EQ(wait_for_blob(options_, "id", 128, 4), b);
  EXPECT_EQ(wait_for_blob(options_, "id", 128, 4), b);  // every rank reads the same file
  // Only the final file remains (the temporary one was removed).
  EXPECT_EQ(std::distance(fs::directory_iterator(options_.dir), fs::directory_iterator()), 1);
}

TEST_F(RendezvousTest, ReadersWaitForTheWriter) {
  const auto b = blob(128, 2);
  std::vector<std::vector<std::byte>> got(3);
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] { got[static_cast<size_t>(r)] = wait_for_blob(options_, "id", 128, 4); });
  }
  std::this_thread::sleep_for(milliseconds(100));
  publish_blob(options_, "id", b, 4);
  for (auto& t : readers) t.join();
  for (const auto& g : got) EXPECT_EQ(g, b);
}

TEST_F(RendezvousTest, TimeoutNamesThePath) {
  options_.timeout = milliseconds(50);
  const auto start = std::chrono::steady_clock::now();
  const std::string msg = message_of([&] { wait_for_blob(options_, "id", 128, 2); });
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(50));
  EXPECT_NE(msg.find((options_.dir / "id").string()), std::string::npos) << msg;
  EXPECT_NE(msg.find("did not appear within 50 ms"), std::string::npos) << msg;
}

TEST_F(RendezvousTest, StaleFileIsRefused) {
  publish_blob(options_, "id", blob(128, 3), 2);
  const std::string msg = message_of([&] { publish_blob(options_, "id", blob(128, 4), 2); });
  EXPECT_NE(msg.find("exists already"), std::string::npos) << msg;
  EXPECT_EQ(wait_for_blob(options_, "id", 128, 2), blob(128, 3));  // the first one is untouched
}

TEST_F(RendezvousTest, MismatchesAreErrors) {
  publish_blob(options_, "id", blob(16, 5), 2);
  const std::string world = message_of([&] { wait_for_blob(options_, "id", 16, 4); });
  EXPECT_NE(world.find("world=2"), std::string::npos) << world;
  EXPECT_NE(world.find("world=4"), std::string::npos) << world;
  const std::string length = message_of([&] { wait_for_blob(options_, "id", 8, 2); });
  EXPECT_NE(length.find("bytes=16"), std::string::npos) << length;
}

TEST(RendezvousEnv, ReadsDirectoryAndTimeout) {
  std::map<std::string, std::string> vars;
  auto getenv = [&](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  try {
    rendezvous_from_env(getenv);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SPEEDRUN_RENDEZVOUS_DIR"), std::string::npos) << e.what();
  }
  vars["SPEEDRUN_RENDEZVOUS_DIR"] = "/tmp/x";
  EXPECT_EQ(rendezvous_from_env(getenv).dir, fs::path("/tmp/x"));
  EXPECT_EQ(rendezvous_from_env(getenv).timeout, std::chrono::seconds(300));
  vars["SPEEDRUN_RENDEZVOUS_TIMEOUT_S"] = "7";
  EXPECT_EQ(rendezvous_from_env(getenv).timeout, std::chrono::seconds(7));
  for (const char* bad : {"0", "-3", "ten", "5s", ""}) {
    vars["SPEEDRUN_RENDEZVOUS_TIMEOUT_S"] = bad;
    EXPECT_THROW(rendezvous_from_env(getenv), Error) << bad;
  }
}

}  // namespace
}  // namespace gpt
