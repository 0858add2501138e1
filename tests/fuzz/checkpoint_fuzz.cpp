// Checkpoint reader (trainer/run/checkpoint.h). The input is the checkpoint without its trailing checksum, which
// is appended here (FNV-1a 64 of the preceding bytes), so that mutations reach the structure behind the checksum
// test; the first byte being odd sends the input unchanged instead (the checksum and magic checks themselves).
#include <cstring>

#include "base/fnv1a.h"
#include "tests/fuzz/fuzz_support.h"
#include "trainer/run/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static gpt::fuzz::ScratchFile file(".ckpt");
  std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 0) {
    const uint64_t sum = gpt::fnv1a64(bytes);
    bytes.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  }
  const auto& path = file.write(bytes);
  gpt::fuzz::expect_parsed_or_rejected([&] {
    const gpt::CheckpointData checkpoint = gpt::read_checkpoint(path);
    for (const auto& t : checkpoint.tensors) gpt::fuzz::require(t.tensor.nbytes() <= bytes.size(), "tensor bytes");
  });
  return 0;
}
