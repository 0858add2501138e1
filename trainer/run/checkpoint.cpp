#include "trainer/run/checkpoint.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "base/file_read.h"
#include "base/fnv1a.h"

namespace gpt {

namespace {

constexpr char kMagic[8] = {'G', 'P', 'T', 'C', 'K', 'P', 'T', '\0'};
constexpr uint8_t kMaxDims = 8;

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof(T));
}

// Sequential reader over the file bytes; every short read names the file and what was being read.
class Cursor {
 public:
  Cursor(const std::string& bytes, size_t end, std::string file) : bytes_(bytes), end_(end), file_(std::move(file)) {}

  template <typename T>
  T get(const char* what) {
    T value;
    std::memcpy(&value, take(sizeof(T), what), sizeof(T));
    return value;
  }
  const char* take(size_t n, const char* what) {
    GPT_CHECK(n <= end_ - pos_, "checkpoint '", file_, "' is truncated (while reading ", what, " at byte ", pos_, ")");
    const char* p = bytes_.data() + pos_;
    pos_ += n;
    return p;
  }
  size_t pos() const { return pos_; }

 private:
  const std::string& bytes_;
  size_t end_;
  size_t pos_ = 0;
  std::string file_;
};

}  // namespace

void write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    GPT_CHECK(out.good(), "cannot write '", tmp.string(), "' (for '", path.string(), "')");
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.close();  // close() writes what is buffered: its failure counts as well
    if (out.fail()) {
      std::error_code ignored;
      std::filesystem::remove(tmp, ignored);
      GPT_FAIL("writing '", tmp.string(), "' (for '", path.string(), "') failed (disk full?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    GPT_FAIL("cannot rename '", tmp.string(), "' to '", path.string(), "': ", ec.message());
  }
}

void write_checkpoint(const std::filesystem::path& path, const nlohmann::json& meta,
                      const std::vector<NamedTensor>& tensors) {
  std::string out;
  out.append(kMagic, sizeof(kMagic));
  put<uint32_t>(out, kCheckpointVersion);
  const std::string meta_text = meta.dump();
  put<uint64_t>(out, meta_text.size());
  out += meta_text;
  put<uint64_t>(out, tensors.size());
  for (const NamedTensor& t : tensors) {
    const Tensor host = t.tensor.to(Device::cpu);
    GPT_CHECK(host.ndim() <= kMaxDims, "checkpoint: tensor '", t.name, "' has too many dimensions");
    put<uint32_t>(out, static_cast<uint32_t>(t.name.size()));
    out += t.name;
    put<uint8_t>(out, static_cast<uint8_t>(host.dtype()));
    put<uint8_t>(out, static_cast<uint8_t>(host.ndim()));
    for (int64_t d : host.shape()) put<int64_t>(out, d);
    put<uint64_t>(out, host.nbytes());
    out.append(static_cast<const char*>(host.raw()), host.nbytes());
  }
  put<uint64_t>(out, fnv1a64(out));
  write_file_atomically(path, out);
}

CheckpointData read_checkpoint(const std::filesystem::path& path) {
  const std::string file = path.string();
  // Checked before opening: opening a FIFO for reading waits for a writer, forever.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  GPT_CHECK(!ec && std::filesystem::exists(status), "cannot read checkpoint '", file, "': no such file");
  GPT_CHECK(std::filesystem::is_regular_file(status), "checkpoint '", file,
            "' is not a regular file (a FIFO, device or folder cannot be a checkpoint)");
  const std::optional<std::string> read = try_read_file(path);
  GPT_CHECK(read.has_value(), "cannot read checkpoint '", file, "'");
  const std::string& bytes = *read;
  GPT_CHECK(bytes.size() >= sizeof(kMagic) + sizeof(uint32_t) + sizeof(uint64_t) &&
                std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0,
            "'", file, "' is not a train_gpt checkpoint (bad magic)");
  const size_t body = bytes.size() - sizeof(uint64_t);
  uint64_t stored_sum;
  std::memcpy(&stored_sum, bytes.data() + body, sizeof(stored_sum));

  Cursor cur(bytes, body, file);
  cur.take(sizeof(kMagic), "magic");
  const auto version = cur.get<uint32_t>("version");
  GPT_CHECK(version == kCheckpointVersion, "checkpoint '", file, "' has format version ", version,
            ", this build reads version ", kCheckpointVersion);
  GPT_CHECK(fnv1a64(std::string_view(bytes).substr(0, body)) == stored_sum, "checkpoint '", file,
            "' is corrupt (checksum mismatch)");

  CheckpointData data;
  const auto meta_size = cur.get<uint64_t>("metadata length");
  const char* meta_text = cur.take(meta_size, "metadata");
  try {
    data.meta = nlohmann::json::parse(meta_text, meta_text + meta_size);
  } catch (const nlohmann::json::exception& e) {
    GPT_FAIL("checkpoint '", file, "': metadata is not valid JSON: ", e.what());
  }
  const auto count = cur.get<uint64_t>("tensor count");
  for (uint64_t i = 0; i < count; ++i) {
    const auto name_size = cur.get<uint32_t>("tensor name length");
    const char* name = cur.take(name_size, "tensor name");
    const auto dtype_code = cur.get<uint8_t>("dtype");
    GPT_CHECK(dtype_code <= static_cast<uint8_t>(DType::e5m2), "checkpoint '", file, "': tensor '",
              std::string(name, name_size), "' has unknown dtype code ", int{dtype_code});
    const auto ndim = cur.get<uint8_t>("rank");
    GPT_CHECK(ndim <= kMaxDims, "checkpoint '", file, "': tensor has ", int{ndim}, " dimensions");
    Shape shape;
    for (uint8_t d = 0; d < ndim; ++d) {
      const auto extent = cur.get<int64_t>("shape");
      GPT_CHECK(extent >= 0, "checkpoint '", file, "': negative extent in tensor '", std::string(name, name_size), "'");
      shape.push_back(extent);
    }
    const auto nbytes = cur.get<uint64_t>("byte count");
    const auto dtype = static_cast<DType>(dtype_code);
    // The byte size the shape needs, computed without overflow: extents come from the file. The element count is
    // multiplied left to right as shape_numel does (signed): every partial product must fit, even when a later
    // extent of 0 would make the whole product small.
    uint64_t needed = dtype_size(dtype);
    int64_t elements = 1;
    bool representable = true;
    for (const int64_t extent : shape) {
      representable = representable && !__builtin_mul_overflow(needed, static_cast<uint64_t>(extent), &needed) &&
                      !__builtin_mul_overflow(elements, extent, &elements);
    }
    GPT_CHECK(representable && needed <= static_cast<uint64_t>(INT64_MAX), "checkpoint '", file, "': tensor '",
              std::string(name, name_size), "' has a shape of more than 2^63 bytes or elements");
    GPT_CHECK(nbytes == needed, "checkpoint '", file, "': tensor '", std::string(name, name_size), "' holds ", nbytes,
              " bytes, its shape needs ", needed);
    const char* payload = cur.take(nbytes, "tensor data");
    Tensor t = Tensor::empty(shape, dtype);
    std::memcpy(t.raw(), payload, nbytes);
    data.tensors.push_back({std::string(name, name_size), std::move(t)});
  }
  GPT_CHECK(cur.pos() == body, "checkpoint '", file, "' has ", body - cur.pos(), " unexpected trailing bytes");
  return data;
}

}  // namespace gpt
