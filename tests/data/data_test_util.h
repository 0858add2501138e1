#pragma once
// Helpers shared by the data-layer tests: a self-deleting scratch directory and raw shard bytes.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "trainer/data/shard.h"
#include "trainer/data/train_loader.h"

namespace gpt::test {

class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = "gpt_data_";
    if (info != nullptr) name += std::string(info->test_suite_name()) + "_" + info->name();
    name += "_" + std::to_string(std::random_device{}());
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Header (magic, version, count) followed by the tokens, byte for byte as a shard file holds them.
inline std::vector<char> shard_bytes(std::span<const std::uint16_t> tokens, std::int32_t magic = kShardMagic,
                                     std::int32_t version = kShardVersion,
                                     std::optional<std::int64_t> count = std::nullopt) {
  std::vector<std::int32_t> header(kShardHeaderInts, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = static_cast<std::int32_t>(count.value_or(static_cast<std::int64_t>(tokens.size())));
  std::vector<char> bytes(kShardHeaderBytes + 2 * tokens.size());
  std::memcpy(bytes.data(), header.data(), kShardHeaderBytes);
  if (!tokens.empty()) std::memcpy(bytes.data() + kShardHeaderBytes, tokens.data(), 2 * tokens.size());
  return bytes;
}

inline void write_bytes(const std::filesystem::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Documents [BOS, t, t+1, ...] of the given lengths (BOS included), token values distinct per position.
inline std::vector<std::uint16_t> make_documents(const std::vector<int>& lengths) {
  std::vector<std::uint16_t> tokens;
  for (int len : lengths) {
    tokens.push_back(kBosToken);
    for (int i = 1; i < len; ++i) tokens.push_back(static_cast<std::uint16_t>((tokens.size() * 7 + 1) % 50000));
  }
  return tokens;
}

// Training shards of documents of given lengths, in a scratch folder.
struct ShardSet {
  ScratchDir dir;
  std::vector<std::filesystem::path> paths;
  std::vector<std::vector<std::uint16_t>> tokens;
  void add(const std::vector<int>& lengths) {
    tokens.push_back(make_documents(lengths));
    paths.push_back(dir / ("train_" + std::to_string(paths.size()) + ".bin"));
    write_shard(paths.back(), tokens.back());
  }
};

inline TrainLoaderOptions options_for(const ShardSet& set, int world, int rank, int slices = 8) {
  return TrainLoaderOptions{.shards = set.paths,
                            .slices_per_call = slices,
                            .world_size = world,
                            .rank = rank,
                            .bigram_rows = kHeadBigramRows};
}

}  // namespace gpt::test
