#include "trainer/run/run_log.h"

#include <sys/resource.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "base/check.h"
#include "base/cpu_model.h"
#include "trainer/build_info.h"

namespace gpt {

namespace {

std::string format(const char* fmt, auto... args) {
  std::array<char, 256> buf{};
  const int n = std::snprintf(buf.data(), buf.size(), fmt, args...);
  GPT_CHECK(n >= 0 && static_cast<size_t>(n) < buf.size(), "log line too long");
  return std::string(buf.data(), static_cast<size_t>(n));
}

// The compiler's name with its version: GCC's __VERSION__ is the bare number ("12.2.0"), Clang's names itself.
std::string compiler_name(const std::string& version) {
#if defined(__clang__)
  return version.find("lang") == std::string::npos ? "Clang " + version : version;
#elif defined(__GNUC__)
  return "GCC " + version;
#else
  return version;
#endif
}

}  // namespace

std::string validation_line(int64_t step, int64_t total_steps, double val_loss, double train_time_ms) {
  // Python's "{:.4f}" prints nan/inf as "nan"/"inf", as printf does.
  return format("step:%lld/%lld val_loss:%.4f train_time:%.0fms step_avg:%.2fms", static_cast<long long>(step),
                static_cast<long long>(total_steps), val_loss, train_time_ms,
                train_time_ms / static_cast<double>(std::max<int64_t>(step, 1)));
}

std::string training_line(int64_t step, int64_t total_steps, double train_time_ms) {
  return format("step:%lld/%lld train_time:%.0fms step_avg:%.2fms", static_cast<long long>(step),
                static_cast<long long>(total_steps), train_time_ms, train_time_ms / static_cast<double>(step));
}

std::string peak_memory_line(int64_t allocated_mib, int64_t reserved_mib) {
  return format("peak memory allocated: %lld MiB reserved: %lld MiB", static_cast<long long>(allocated_mib),
                static_cast<long long>(reserved_mib));
}

nlohmann::json RunEnvironment::to_json() const {
  nlohmann::json places = nlohmann::json::array();
  for (const RankPlace& p : ranks) places.push_back({{"rank", p.rank}, {"host", p.host}, {"device", p.device}});
  return {{"hostname", hostname},
          {"cpu", cpu},
          {"threads", threads},
          {"backend", backend},
          {"compiler", compiler},
          {"build_flags", build_type},
          {"git_commit", git_commit},
          {"git_dirty", git_dirty},
          {"gpu", gpu},
          {"gpu_uuid", gpu_uuid},
          {"driver", driver},
          {"cuda", cuda},
          {"nccl", nccl},
          {"gpu_clocks", gpu_clocks},
          {"gpu_power_limit", gpu_power_limit},
          {"world_size", world_size},
          {"ranks", places}};
}

RunEnvironment describe_environment(const std::string& backend, int threads) {
  RunEnvironment env;
  std::array<char, 256> host{};
  env.hostname = ::gethostname(host.data(), host.size() - 1) == 0 ? host.data() : "unknown";
  env.cpu = cpu_model();
  if (env.cpu.empty()) env.cpu = "unknown";
  env.threads = threads;
  env.backend = backend;
  const BuildInfo& info = build_info();
  env.compiler = compiler_name(info.compiler);
  env.build_type = info.build_type;
  env.git_commit = info.git_commit;
  env.git_dirty = info.git_dirty;
  return env;
}

int64_t peak_rss_mib() {
  rusage usage{};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) / 1024;  // Linux reports KiB
}

RunLog::RunLog(const std::filesystem::path& path, bool enabled, bool append, bool echo)
    : enabled_(enabled), echo_(echo) {
  if (!enabled_) return;
  path_ = path;
  // A link planted at OUT/ID.txt beforehand would make the run write (or truncate) the file it points to.
  std::error_code ec;
  GPT_CHECK(!std::filesystem::is_symlink(std::filesystem::symlink_status(path, ec)), "the run log '", path.string(),
            "' is a symbolic link; refusing to write through it (remove it, or choose another --out/--run-id)");
  file_.open(path, append ? std::ios::app : std::ios::trunc);
  GPT_CHECK(file_.good(), "cannot write the run log '", path.string(), "' (--out)");
}

void RunLog::line(const std::string& text) {
  if (!enabled_) return;
  errno = 0;
  file_ << text << '\n';
  file_.flush();
  GPT_CHECK(file_.good(), "writing the run log '", path_.string(), "' failed",
            errno != 0 ? std::string(": ") + std::strerror(errno) : std::string());
  if (echo_) std::cout << text << std::endl;
}

}  // namespace gpt
