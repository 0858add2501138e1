#include "trainer/data/shard.h"

#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <map>
#include <system_error>
#include <utility>

#include "base/check.h"

namespace gpt {

static_assert(std::endian::native == std::endian::little, "shards are little-endian; big-endian hosts unsupported");

namespace {

namespace fs = std::filesystem;

std::string errno_text(int err) { return std::generic_category().message(err); }

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_zstd_path(const fs::path& path) { return ends_with(path.filename().string(), ".zst"); }

// Owns a POSIX file descriptor.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  // Closes now and reports failure (a failed close can mean lost writes).
  int close_checked() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

// Interprets the first 1024 bytes and returns N, failing on a wrong magic or version.
std::int64_t parse_header(const fs::path& path, std::span<const std::byte> header_bytes) {
  std::array<std::int32_t, kShardHeaderInts> header{};
  std::memcpy(header.data(), header_bytes.data(), kShardHeaderBytes);
  GPT_CHECK(header[0] == kShardMagic, "shard ", path.string(), ": wrong magic ", header[0], " (expected ", kShardMagic,
            ")");
  GPT_CHECK(header[1] == kShardVersion, "shard ", path.string(), ": wrong version ", header[1], " (expected ",
            kShardVersion, ")");
  GPT_CHECK(header[2] >= 0, "shard ", path.string(), ": negative token count ", header[2], " in header");
  return header[2];
}

void check_payload_size(const fs::path& path, std::int64_t n_tokens, std::uint64_t payload_bytes) {
  const std::uint64_t expected = 2 * static_cast<std::uint64_t>(n_tokens);
  GPT_CHECK(payload_bytes >= expected, "shard ", path.string(), ": truncated payload: ", payload_bytes,
            " bytes after the header, expected ", expected, " (2 x ", n_tokens, " tokens)");
  GPT_CHECK(payload_bytes == expected, "shard ", path.string(), ": payload too long: ", payload_bytes,
            " bytes after the header, expected ", expected, " (2 x ", n_tokens, " tokens)");
}

void check_token_ids(const fs::path& path, std::span<const std::uint16_t> tokens) {
  const auto bad = std::find_if(tokens.begin(), tokens.end(), [](std::uint16_t t) { return t >= kTokenIdLimit; });
  if (bad == tokens.end()) return;
  const auto offset = static_cast<std::size_t>(bad - tokens.begin());
  GPT_FAIL("shard ", path.string(), ": token id ", *bad, " >= ", kTokenIdLimit, " at token offset ", offset, " (byte ",
           kShardHeaderBytes + 2 * offset, ")");
}

// A shard file opened for reading, read front to back. Shards are read into memory, not mapped: a mapped file that
// shrinks while the run holds it ends the process with SIGBUS at the first lost page, with no message and no
// summary; a read sees a short file and fails naming it, and a file changed after it was read no longer matters.
class ShardReader {
 public:
  explicit ShardReader(const fs::path& path) : path_(path) {
    // O_NONBLOCK: a FIFO swapped in after the type check must not block open(); fstat below rejects it.
    fd_ = FileDescriptor(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    GPT_CHECK(fd_.get() >= 0, "shard ", path.string(), ": cannot open: ", errno_text(errno));
    struct stat st {};
    GPT_CHECK(::fstat(fd_.get(), &st) == 0, "shard ", path.string(), ": cannot stat: ", errno_text(errno));
    GPT_CHECK(S_ISREG(st.st_mode), "shard ", path.string(), ": not a regular file");
    size_ = static_cast<std::uint64_t>(st.st_size);
  }
  std::uint64_t size() const { return size_; }
  // The next n bytes into dst.
  void read(std::byte* dst, std::uint64_t n) {
    while (n > 0) {
      const ssize_t got = ::pread(fd_.get(), dst, static_cast<std::size_t>(std::min<std::uint64_t>(n, 1u << 30)),
                                  static_cast<off_t>(offset_));
      if (got < 0 && errno == EINTR) continue;
      GPT_CHECK(got >= 0, "shard ", path_.string(), ": read failed at byte ", offset_, ": ", errno_text(errno));
      GPT_CHECK(got > 0, "shard ", path_.string(), ": the file shrank while it was read (", size_,
                " bytes when opened, it ended at byte ", offset_, "); a shard must stay unchanged during a run");
      dst += got;
      offset_ += static_cast<std::uint64_t>(got);
      n -= static_cast<std::uint64_t>(got);
    }
  }

 private:
  const fs::path& path_;
  FileDescriptor fd_{-1};
  std::uint64_t size_ = 0, offset_ = 0;
};

}  // namespace

Shard::Shard(Shard&&) noexcept = default;
Shard& Shard::operator=(Shard&&) noexcept = default;
Shard::~Shard() = default;

namespace {

// Streams a zstd file: the first 1024 decompressed bytes are the header, the rest the payload. Stops as soon as
// the payload exceeds what the header announces, so a corrupt file cannot make us allocate without bound.
std::vector<std::uint16_t> decompress_shard(const fs::path& path, std::span<const std::byte> compressed) {
  std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> ctx(ZSTD_createDCtx(), &ZSTD_freeDCtx);
  GPT_CHECK(ctx != nullptr, "shard ", path.string(), ": cannot create a zstd context");
  std::array<std::byte, kShardHeaderBytes> header{};
  std::size_t header_fill = 0;
  std::int64_t n_tokens = -1;
  std::vector<std::uint16_t> payload;
  std::uint64_t payload_bytes = 0;
  std::vector<std::byte> chunk(ZSTD_DStreamOutSize());

  ZSTD_inBuffer in{compressed.data(), compressed.size(), 0};
  std::size_t last_rc = 1;
  bool progressed = true;
  while (progressed) {
    ZSTD_outBuffer out{chunk.data(), chunk.size(), 0};
    last_rc = ZSTD_decompressStream(ctx.get(), &out, &in);
    GPT_CHECK(!ZSTD_isError(last_rc), "shard ", path.string(), ": corrupt zstd data: ", ZSTD_getErrorName(last_rc));
    std::span<const std::byte> produced(chunk.data(), out.pos);
    const std::size_t to_header = std::min(produced.size(), kShardHeaderBytes - header_fill);
    std::memcpy(header.data() + header_fill, produced.data(), to_header);
    header_fill += to_header;
    produced = produced.subspan(to_header);
    if (n_tokens < 0 && header_fill == kShardHeaderBytes) {
      n_tokens = parse_header(path, header);
      // Reserve from the frame's declared size, never from the (possibly corrupt) header alone.
      const unsigned long long declared = ZSTD_getFrameContentSize(compressed.data(), compressed.size());
      if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != ZSTD_CONTENTSIZE_ERROR &&
          declared == kShardHeaderBytes + 2 * static_cast<std::uint64_t>(n_tokens)) {
        payload.reserve(static_cast<std::size_t>(n_tokens));
      }
    }
    if (!produced.empty()) {
      GPT_CHECK(payload_bytes + produced.size() <= 2 * static_cast<std::uint64_t>(n_tokens), "shard ", path.string(),
                ": payload too long: more than ", 2 * n_tokens, " bytes after the header (2 x ", n_tokens, " tokens)");
      payload.resize(static_cast<std::size_t>((payload_bytes + produced.size() + 1) / 2));
      std::memcpy(reinterpret_cast<std::byte*>(payload.data()) + payload_bytes, produced.data(), produced.size());
      payload_bytes += produced.size();
    }
    // More output may be pending even when all input is consumed; stop only when nothing moves.
    progressed = out.pos > 0 || in.pos < in.size;
    if (in.pos == in.size && out.pos < out.size) break;
  }
  GPT_CHECK(last_rc == 0, "shard ", path.string(), ": truncated zstd stream (frame incomplete)");
  GPT_CHECK(header_fill == kShardHeaderBytes, "shard ", path.string(), ": truncated header: ", header_fill,
            " bytes, expected ", kShardHeaderBytes);
  check_payload_size(path, n_tokens, payload_bytes);
  return payload;
}

}  // namespace

Shard Shard::open(const fs::path& path, const ShardOpenOptions& options) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  GPT_CHECK(!ec && fs::exists(status), "shard ", path.string(), ": no such file");
  // Checked before open(): opening a FIFO for reading blocks until a writer appears.
  GPT_CHECK(fs::is_regular_file(status), "shard ", path.string(), ": not a regular file");
  Shard shard;
  shard.path_ = path;
  ShardReader file(path);
  if (is_zstd_path(path)) {
    std::vector<std::byte> compressed(static_cast<std::size_t>(file.size()));
    file.read(compressed.data(), compressed.size());
    shard.owned_ = decompress_shard(path, compressed);
    shard.compressed_ = true;
  } else {
    std::array<std::byte, kShardHeaderBytes> header{};
    GPT_CHECK(file.size() >= header.size(), "shard ", path.string(), ": truncated header: ", file.size(),
              " bytes, expected ", header.size());
    file.read(header.data(), header.size());
    const std::int64_t n_tokens = parse_header(path, header);
    check_payload_size(path, n_tokens, file.size() - header.size());
    shard.owned_.resize(static_cast<std::size_t>(n_tokens));
    file.read(reinterpret_cast<std::byte*>(shard.owned_.data()), 2 * static_cast<std::uint64_t>(n_tokens));
  }
  shard.tokens_ = shard.owned_;
  if (options.check_token_ids) check_token_ids(path, shard.tokens_);
  return shard;
}

std::vector<std::int64_t> bos_positions(std::span<const std::uint16_t> tokens) {
  std::vector<std::int64_t> positions;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == kBosToken) positions.push_back(static_cast<std::int64_t>(i));
  }
  return positions;
}

namespace {

void write_all(const fs::path& path, int fd, std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    GPT_CHECK(n > 0, "shard ", path.string(), ": write failed: ", errno_text(errno));
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
}

// Sends the shard bytes (header, then payload) to `fd`, compressed or not.
void emit_shard(const fs::path& path, int fd, std::span<const std::byte> header, std::span<const std::byte> payload,
                bool compress, int level) {
  if (!compress) {
    write_all(path, fd, header);
    write_all(path, fd, payload);
    return;
  }
  std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> ctx(ZSTD_createCCtx(), &ZSTD_freeCCtx);
  GPT_CHECK(ctx != nullptr, "shard ", path.string(), ": cannot create a zstd context");
  const std::size_t rc = ZSTD_CCtx_setParameter(ctx.get(), ZSTD_c_compressionLevel, level);
  GPT_CHECK(!ZSTD_isError(rc), "shard ", path.string(), ": bad zstd level ", level, ": ", ZSTD_getErrorName(rc));
  std::vector<std::byte> out_chunk(ZSTD_CStreamOutSize());
  auto feed = [&](std::span<const std::byte> input, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{input.data(), input.size(), 0};
    for (;;) {
      ZSTD_outBuffer out{out_chunk.data(), out_chunk.size(), 0};
      const std::size_t remaining = ZSTD_compressStream2(ctx.get(), &out, &in, mode);
      GPT_CHECK(!ZSTD_isError(remaining), "shard ", path.string(), ": zstd failed: ", ZSTD_getErrorName(remaining));
      write_all(path, fd, {out_chunk.data(), out.pos});
      const bool done = mode == ZSTD_e_end ? remaining == 0 : in.pos == in.size;
      if (done) break;
    }
  };
  feed(header, ZSTD_e_continue);
  feed(payload, ZSTD_e_end);
}

}  // namespace

void write_shard(const fs::path& path, std::span<const std::uint16_t> tokens, const ShardWriteOptions& options) {
  GPT_CHECK(tokens.size() <= static_cast<std::size_t>(INT32_MAX), "shard ", path.string(), ": ", tokens.size(),
            " tokens exceed the int32 count field");
  check_token_ids(path, tokens);
  std::array<std::int32_t, kShardHeaderInts> header{};
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<std::int32_t>(tokens.size());

  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  GPT_CHECK(fd.get() >= 0, "shard ", path.string(), ": cannot create ", tmp.string(), ": ", errno_text(errno));
  try {
    emit_shard(path, fd.get(), std::as_bytes(std::span(header)), std::as_bytes(tokens), is_zstd_path(path),
               options.zstd_level);
    GPT_CHECK(::fsync(fd.get()) == 0, "shard ", path.string(), ": fsync failed: ", errno_text(errno));
    GPT_CHECK(fd.close_checked() == 0, "shard ", path.string(), ": close failed: ", errno_text(errno));
    GPT_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, "shard ", path.string(), ": cannot rename ", tmp.string(),
              " onto it: ", errno_text(errno));
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

std::vector<fs::path> list_shards(const fs::path& dir, std::string_view pattern) {
  std::error_code ec;
  GPT_CHECK(fs::is_directory(dir, ec), "shard directory ", dir.string(), ": not a directory");
  std::string glob(pattern);
  if (glob.find_first_of("*?[") == std::string::npos) glob += '*';
  std::map<std::string, fs::path> by_name;  // key: name without ".zst"; ordered lexicographically
  fs::directory_iterator it(dir, ec);
  GPT_CHECK(!ec, "shard directory ", dir.string(), ": cannot list: ", ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    GPT_CHECK(!ec, "shard directory ", dir.string(), ": cannot list: ", ec.message());
    const std::string name = it->path().filename().string();
    const bool zst = ends_with(name, ".bin.zst");
    if (!zst && !ends_with(name, ".bin")) continue;
    const std::string key = zst ? name.substr(0, name.size() - 4) : name;
    if (::fnmatch(glob.c_str(), key.c_str(), 0) != 0) continue;
    auto [pos, inserted] = by_name.emplace(key, it->path());
    if (!inserted && !zst) pos->second = it->path();  // prefer the uncompressed twin
  }
  std::vector<fs::path> paths;
  paths.reserve(by_name.size());
  for (auto& [key, path] : by_name) paths.push_back(std::move(path));
  return paths;
}

void check_corpus_shard(const Shard& shard, ShardSplit split) {
  const char* name = split == ShardSplit::train ? "train" : "validation";
  GPT_CHECK(shard.size() > 0, name, " shard ", shard.path().string(), ": holds 0 tokens");
  const auto tokens = shard.tokens();
  GPT_CHECK(std::find(tokens.begin(), tokens.end(), kBosToken) != tokens.end(), name, " shard ", shard.path().string(),
            ": holds ", tokens.size(), " tokens but no BOS (", kBosToken, "); every document must start with one");
}

std::vector<fs::path> find_split_shards(const fs::path& dir, ShardSplit split) {
  const std::string name = split == ShardSplit::train ? "train" : "val";
  auto paths = list_shards(dir, "fineweb_" + name + "_*.bin");
  if (paths.empty()) paths = list_shards(dir, name + "_*.bin");
  GPT_CHECK(!paths.empty(), "shard directory ", dir.string(), ": no ", name, " shards (expected fineweb_", name,
            "_*.bin or ", name, "_*.bin[.zst])");
  return paths;
}

}  // namespace gpt
