#include "trainer/comm/rendezvous.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "base/check.h"

namespace gpt {

namespace {

std::string header_line(int world_size, size_t bytes) {
  std::ostringstream out;
  out << "speedrun-rendezvous v1 world=" << world_size << " bytes=" << bytes << "\n";
  return out.str();
}

}  // namespace

void publish_blob(const RendezvousOptions& options, const std::string& name, std::span<const std::byte> blob,
                  int world_size) {
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  GPT_CHECK(!ec, "rendezvous: cannot create directory ", options.dir.string(), ": ", ec.message());
  const std::filesystem::path final_path = options.dir / name;
  const std::filesystem::path temp_path = options.dir / (name + ".tmp." + std::to_string(::getpid()));
  {
    std::ofstream out(temp_path, std::ios::binary | std::ios::trunc);
    GPT_CHECK(out.good(), "rendezvous: cannot write ", temp_path.string());
    const std::string header = header_line(world_size, blob.size());
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
    out.flush();
    GPT_CHECK(out.good(), "rendezvous: writing ", temp_path.string(), " failed");
  }
  // link() publishes the complete file under its final name and fails if that
  // name exists: a leftover from an earlier run is an error, never silently
  // replaced.
  const int linked = ::link(temp_path.c_str(), final_path.c_str());
  const int link_errno = errno;
  std::filesystem::remove(temp_path, ec);
  GPT_CHECK(linked == 0 || link_errno != EEXIST, "rendezvous: ", final_path.string(),
            " exists already (left by an earlier run?); every run needs a fresh ", kRendezvousDirVar);
  GPT_CHECK(linked == 0, "rendezvous: cannot publish ", final_path.string(), ": ", std::strerror(link_errno));
}

std::vector<std::byte> wait_for_blob(const RendezvousOptions& options, const std::string& name, size_t bytes,
                                     int world_size) {
  const std::filesystem::path path = options.dir / name;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in.good()) {
      std::string header;
      std::getline(in, header);
      const std::string expected = header_line(world_size, bytes);
      GPT_CHECK(header + "\n" == expected, "rendezvous: ", path.string(), " starts with '", header, "', expected '",
                expected.substr(0, expected.size() - 1), "' (ranks launched with different world sizes?)");
      std::vector<char> body{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      GPT_CHECK(body.size() == bytes, "rendezvous: ", path.string(), " holds ", body.size(),
                " bytes after its header, expected ", bytes);
      std::vector<std::byte> blob(bytes);
      std::memcpy(blob.data(), body.data(), bytes);
      return blob;
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    GPT_CHECK(waited < options.timeout, "rendezvous: ", path.string(), " did not appear within ",
              std::chrono::duration_cast<std::chrono::milliseconds>(options.timeout).count(),
              " ms; did rank 0 start, and do all ranks see the same ", kRendezvousDirVar, "?");
    std::this_thread::sleep_for(options.poll);
  }
}

RendezvousOptions rendezvous_from_env(const std::function<std::optional<std::string>(const std::string&)>& getenv) {
  RendezvousOptions options;
  const auto dir = getenv(kRendezvousDirVar);
  GPT_CHECK(dir && !dir->empty(), "environment variable ", kRendezvousDirVar,
            " is not set: a multi-process run needs a fresh directory all "
            "ranks see (train_gpt --gpus N sets it)");
  options.dir = *dir;
  if (const auto timeout = getenv(kRendezvousTimeoutVar)) {
    int seconds = 0;
    const char* end = timeout->data() + timeout->size();
    const auto [ptr, ec] = std::from_chars(timeout->data(), end, seconds);
    GPT_CHECK(ec == std::errc() && ptr == end && seconds > 0, "environment variable ", kRendezvousTimeoutVar, "='",
              *timeout, "' should be a positive number of seconds");
    options.timeout = std::chrono::seconds(seconds);
  }
  return options;
}

}  // namespace gpt
