#pragma once
// The fixture of the end-to-end tests: runs the real `harness` program (and the synthetic trainer, both
// built into build*/bin/) against a database in a fresh temporary folder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness/launcher/process.h"
#include "harness/store/store.h"
#include "tests/harness/temp_dir.h"

namespace gpt::harness {

using testing::TempDir;

inline const std::string kBin = std::string(SPEEDRUN_BINARY_DIR) + "/bin/";

struct Result {
  int code = -1;
  std::string output;  // stdout and stderr together
};

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class RecordE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kBin + "harness") && std::filesystem::exists(kBin + "synthetic_trainer"))
        << "build the `harness` and `synthetic_trainer` targets first (" << kBin << ")";
  }

  std::vector<std::string> synthetic(std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {
        kBin + "synthetic_trainer", "--seed", "{seed}", "--run-id", "{run_id}", "--out", "{out}"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  // The harness with this test's database (--db before any `-- CMD`).
  Process start(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {}) {
    std::vector<std::string> with_db = {"--db", db().string()};
    with_db.insert(with_db.end(), args.begin(), args.end());
    return start_without_db(std::move(with_db), std::move(env));
  }

  // The harness with exactly `args` (the database from $SPEEDRUN_DB or its default, or a --db in `args`).
  Process start_without_db(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {}) {
    std::vector<std::string> argv = {kBin + "harness"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::filesystem::remove(dir / "out.txt");
    return Process::start(LaunchSpec{argv, dir / "out.txt", std::move(env)});
  }

  Result finish(Process p) {
    const ExitInfo exit = p.wait();
    return {exit.exited ? exit.exit_code : 128 + exit.signal, read_file(dir / "out.txt")};
  }

  Result harness(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {}) {
    return finish(start(std::move(args), std::move(env)));
  }

  Result harness_without_db(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {}) {
    return finish(start_without_db(std::move(args), std::move(env)));
  }

  // An executable script at `leaf` below the test folder.
  std::filesystem::path script(const std::string& leaf, const std::string& body) const {
    const auto path = dir.write(leaf, "#!/bin/sh\n" + body);
    std::filesystem::permissions(path, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                           std::filesystem::perms::group_exec);
    return path;
  }

  // A command that hangs (ignoring SIGTERM, as does the child it starts, whose pid goes to `pid_file`) after
  // printing `first_line`: only a SIGKILL of its whole process group ends it.
  static std::string hang_body(const std::filesystem::path& pid_file, const std::string& first_line = "started") {
    return "echo " + first_line + "\ntrap '' TERM\nsleep 300 &\necho $! > " + pid_file.string() + "\nwait\n";
  }

  // PATH with `folder` first (stand-in tools such as a fake cmake).
  static std::pair<std::string, std::string> path_with(const std::filesystem::path& folder) {
    const char* path = std::getenv("PATH");
    return {"PATH", folder.string() + ":" + (path ? path : "/usr/bin:/bin")};
  }

  Result record(int runs, std::vector<std::string> trainer_flags, std::vector<std::string> extra = {},
                std::vector<std::pair<std::string, std::string>> env = {}) {
    std::vector<std::string> args = {"record", "--runs", std::to_string(runs), "--name", "sweep"};
    // The synthetic trainer's losses are judged against track 1's target unless a test says otherwise (without
    // --target, record asks train_gpt for the recipe's own target).
    if (std::find(extra.begin(), extra.end(), "--target") == extra.end()) args.insert(args.end(), {"--target", "3.28"});
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("--");
    for (auto& a : synthetic(std::move(trainer_flags))) args.push_back(a);
    return harness(args, std::move(env));
  }

  std::vector<RunRecord> runs() {
    Store store = Store::open(db());
    return store.runs(store.find_sweep("sweep")->id, true);
  }

  std::filesystem::path db() const { return dir / "results.db"; }
  TempDir dir;
};

}  // namespace gpt::harness
