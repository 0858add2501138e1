#include "harness/commands/compare_build.h"

#include <spdlog/spdlog.h>

#include "harness/launcher/command.h"
#include "base/check.h"

namespace gpt::harness {
namespace fs = std::filesystem;

std::vector<std::string> configure_command(const fs::path& tree, const fs::path& build_dir, const BuildSettings& s) {
  std::vector<std::string> argv;
  if (fs::exists(tree / "CMakePresets.json")) {
    argv = {"cmake", "--preset", s.preset, "-S", tree.string(), "-B", build_dir.string()};
  } else {
    argv = {"cmake", "-S", tree.string(), "-B", build_dir.string(), "-DCMAKE_BUILD_TYPE=RelWithDebInfo"};
  }
  argv.insert(argv.end(), s.cmake_args.begin(), s.cmake_args.end());
  return argv;
}

std::string resolve_revision(const std::string& revision) {
  try {
    const std::string repo = capture_stdout({"git", "rev-parse", "--show-toplevel"}, kQuickCommandTimeoutS);
    return capture_stdout({"git", "rev-parse", "--verify", "--quiet", revision + "^{commit}"}, kQuickCommandTimeoutS,
                          repo);
  } catch (const gpt::Error&) {
    return "";
  }
}

BuiltRevision build_revision(const std::string& revision, const BuildSettings& s) {
  GPT_CHECK(!s.preset.empty(), "--preset: the preset name is empty");
  std::string repo_text;
  try {
    repo_text = capture_stdout({"git", "rev-parse", "--show-toplevel"}, kQuickCommandTimeoutS);
  } catch (const gpt::Error& e) {
    GPT_FAIL("compare: building revision '", revision, "' needs a git checkout of the project here (", e.what(),
             "); or name an existing build with --build-dir baseline=DIR / candidate=DIR");
  }
  const fs::path repo = repo_text;
  BuiltRevision b;
  try {
    b.sha = capture_stdout({"git", "rev-parse", "--verify", "--quiet", revision + "^{commit}"}, kQuickCommandTimeoutS,
                           repo);
  } catch (const gpt::Error&) {
    GPT_FAIL("compare: '", revision, "' is neither a git revision of ", repo.string(), " nor a named baseline");
  }
  b.tree = fs::absolute(repo / s.cache_dir / b.sha);
  if (!fs::exists(b.tree / ".git")) {
    fs::create_directories(b.tree.parent_path());
    capture_stdout({"git", "worktree", "add", "--detach", b.tree.string(), b.sha}, s.timeout_s, repo);
  }
  // The trainer finds the tokenizer under its source tree's data/ (git-ignored): share the checkout's.
  std::error_code ec;
  if (fs::exists(repo / "data") && !fs::exists(fs::symlink_status(b.tree / "data", ec))) {
    fs::create_directory_symlink(fs::canonical(repo / "data"), b.tree / "data");
  }
  b.build_dir = b.tree / ("build-compare-" + s.preset);
  b.binary = b.build_dir / "bin" / "train_gpt";
  const fs::path configure_log = b.tree / "harness-configure.log", log = b.tree / "harness-build.log";
  spdlog::info("building {} ({}) with preset {} in {} (log {})", revision, b.sha.substr(0, 12), s.preset,
               b.build_dir.string(), log.string());
  const std::vector<std::string> configure = configure_command(b.tree, b.build_dir, s);
  const CommandResult configured =
      run_command({configure, s.timeout_s, "--build-timeout", b.tree, configure_log, true});
  GPT_CHECK(configured.succeeded(), "compare: configuring ", revision, " failed (", configured.exit.describe(), ": ",
            join_command(configure), "); see ", configure_log.string());
  const std::vector<std::string> build = {"cmake",    "--build",  b.build_dir.string(), "-j", std::to_string(s.jobs),
                                          "--target", "train_gpt"};
  const CommandResult built = run_command({build, s.timeout_s, "--build-timeout", b.tree, log, true});
  GPT_CHECK(built.succeeded(), "compare: building ", revision, " failed (", built.exit.describe(), "); see ",
            log.string());
  GPT_CHECK(fs::exists(b.binary), "compare: the build of ", revision, " has no ", b.binary.string());
  return b;
}

}  // namespace gpt::harness
