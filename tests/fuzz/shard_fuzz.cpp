// Shard reader (trainer/data/shard.h): the first input byte picks the form, the rest is the file:
//   0: a plain `.bin` file as given;  1: a `.bin.zst` file as given (arbitrary zstd frames);
//   2: the rest compressed with zstd into a `.bin.zst` (valid frames around arbitrary shard bytes).
// A shard that opens must hold exactly the tokens its header announces, each < 50257.
#include <zstd.h>

#include <vector>

#include "tests/fuzz/fuzz_support.h"
#include "trainer/data/shard.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using gpt::fuzz::require;
  if (size == 0) return 0;
  static gpt::fuzz::ScratchFile plain("_train_000000.bin"), zst("_train_000000.bin.zst");
  const int form = data[0] % 3;
  std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string compressed;
  if (form == 2) {
    compressed.resize(ZSTD_compressBound(body.size()));
    const size_t n = ZSTD_compress(compressed.data(), compressed.size(), body.data(), body.size(), 1);
    require(!ZSTD_isError(n), "zstd compression of the input");
    compressed.resize(n);
    body = compressed;
  }
  const std::filesystem::path& path = form == 0 ? plain.write(body) : zst.write(body);
  gpt::fuzz::expect_parsed_or_rejected([&] {
    const gpt::Shard shard = gpt::Shard::open(path);
    for (const uint16_t t : shard.tokens()) require(t < gpt::kTokenIdLimit, "token ids checked");
    if (form != 1) {
      const std::string_view file =
          form == 0 ? body : std::string_view(reinterpret_cast<const char*>(data + 1), size - 1);
      require(file.size() == gpt::kShardHeaderBytes + 2 * shard.size(), "token count matches the file size");
    }
    const auto bos = gpt::bos_positions(shard.tokens());
    for (const int64_t p : bos) require(shard.tokens()[static_cast<size_t>(p)] == gpt::kBosToken, "BOS positions");
  });
  return 0;
}
