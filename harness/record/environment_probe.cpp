#include "harness/record/environment_probe.h"

#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>

#include "base/cpu_model.h"

namespace gpt::harness {

namespace {

// First line of a shell command's output ("" if it fails); stderr is discarded.
std::string command_output(const std::string& command, bool all_lines = false) {
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen((command + " 2>/dev/null").c_str(), "r"), &::pclose);
  if (!pipe) return "";
  std::string out;
  std::array<char, 512> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), pipe.get()) != nullptr) out += buf.data();
  if (!all_lines) out = out.substr(0, out.find('\n'));
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

// The longest-versioned libnccl.so.X.Y.Z in the usual library folders ("" when NCCL is absent).
std::string nccl_version() {
  std::string best;
  for (const char* dir : {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/local/cuda/lib64"}) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      constexpr std::string_view prefix = "libnccl.so.";
      if (name.rfind(prefix, 0) == 0 && name.size() - prefix.size() > best.size()) best = name.substr(prefix.size());
    }
  }
  return best;
}

}  // namespace

Environment probe_environment() {
  Environment e;
  const std::string gpu = command_output("nvidia-smi --query-gpu=name,driver_version --format=csv,noheader");
  if (const auto comma = gpu.find(','); comma != std::string::npos) {
    e.gpu = gpu.substr(0, comma);
    e.driver = gpu.substr(gpu.find_first_not_of(' ', comma + 1));
  }
  const std::string nvcc = command_output("nvcc --version | grep release");
  if (const auto pos = nvcc.find("release "); pos != std::string::npos)
    e.cuda = nvcc.substr(pos + 8, nvcc.find(',', pos) - pos - 8);
  e.nccl = nccl_version();
  e.cpu_model = cpu_model();
#if defined(__clang__)
  e.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  e.compiler = "gcc " __VERSION__;
#endif
#ifdef NDEBUG
  e.build_flags = "NDEBUG";
#else
  e.build_flags = "debug";
#endif
  e.git_commit = command_output("git rev-parse HEAD");
  e.git_dirty = !command_output("git status --porcelain --untracked-files=no", true).empty();
  if (const char* revision = std::getenv("SPEEDRUN_REVISION"); revision != nullptr && *revision != '\0') {
    e.git_commit = revision;  // a copied tree (on a GPU machine): its own .git may describe another revision
    e.git_dirty = false;
  }
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) == 0) e.hostname = host.data();
  return e;
}

}  // namespace gpt::harness
