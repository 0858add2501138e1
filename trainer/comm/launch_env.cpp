#include "trainer/comm/launch_env.h"

#include <charconv>
#include <cstdlib>

#include "base/check.h"

namespace gpt {

namespace {

using Getenv = std::function<std::optional<std::string>(const std::string&)>;

int parse_count(const std::string& name, const std::string& text) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  GPT_CHECK(ec == std::errc() && ptr == end && value >= 0, "environment variable ", name, "='", text,
            "' should be a non-negative integer");
  return value;
}

// One launcher's variable names; `local` may be absent from the environment (then local rank = rank).
struct LauncherVars {
  const char* source;
  const char* rank;
  const char* world;
  const char* local;
};

std::optional<LaunchEnv> read_launcher(const Getenv& getenv, const LauncherVars& vars) {
  const auto rank = getenv(vars.rank);
  const auto world = getenv(vars.world);
  if (!rank && !world) return std::nullopt;
  GPT_CHECK(rank && world, "launcher environment (", vars.source, "): ", rank ? vars.world : vars.rank,
            " is missing while ", rank ? vars.rank : vars.world, " is set");
  LaunchEnv env;
  env.source = vars.source;
  env.rank = parse_count(vars.rank, *rank);
  env.world_size = parse_count(vars.world, *world);
  GPT_CHECK(env.world_size >= 1, "environment variable ", vars.world, "=", env.world_size, " should be at least 1");
  GPT_CHECK(env.rank < env.world_size, "environment variable ", vars.rank, "=", env.rank, " should be below ",
            vars.world, "=", env.world_size);
  const auto local = getenv(vars.local);
  env.local_rank = local ? parse_count(vars.local, *local) : env.rank;
  return env;
}

}  // namespace

LaunchEnv detect_launch_env(const Getenv& getenv) {
  static constexpr LauncherVars kLaunchers[] = {
      {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
      {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
      {"mpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
  };
  for (const LauncherVars& vars : kLaunchers) {
    if (auto env = read_launcher(getenv, vars)) return *env;
  }
  return LaunchEnv{};
}

LaunchEnv detect_launch_env() {
  return detect_launch_env([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace gpt
