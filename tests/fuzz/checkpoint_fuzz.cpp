// Checkpoint reader (trainer/run/checkpoint.h). The input is the checkpoint without its trailing checksum, which
// is appended here (FNV-1a 64 of the preceding bytes), so that mutations reach the structure behind the checksum
// test; the first byte being odd sends the input unchanged instead (the checksum and magic checks themselves).
#include <cstring>

#include "tests/fuzz/fuzz_support.h"
#include "trainer/run/checkpoint.h"

namespace {

uint64_t fnv1a(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static gpt::fuzz::ScratchFile file(".ckpt");
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    const uint64_t sum = fnv1a(bytes);
    bytes.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  }
  const auto& path = file.write(bytes);
  gpt::fuzz::expect_parsed_or_rejected([&] {
    const gpt::CheckpointData checkpoint = gpt::read_checkpoint(path);
    for (const auto& t : checkpoint.tensors) gpt::fuzz::require(t.tensor.nbytes() <= bytes.size(), "tensor bytes");
  });
  return 0;
}
