#pragma once
// The fixture of the end-to-end tests: runs the real `harness` program (and the synthetic trainer, both
// built into build*/bin/) against a database in a fresh temporary folder.
#include <gtest/gtest.h>

#include <algorithm>
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
    std::vector<std::string> argv = {kBin + "synthetic_trainer", "--seed", "{seed}", "--run-id", "{run_id}", "--out", "{out}"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  Process start(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {}) {
    std::vector<std::string> argv = {kBin + "harness", "--db", db().string()};  // before any `-- CMD`
    argv.insert(argv.end(), args.begin(), args.end());
    std::filesystem::remove(dir / "out.txt");
    return Process::start(LaunchSpec{argv, dir / "out.txt", std::move(env)});
  }

  Result harness(std::vector<std::string> args, std::vector<std::pair<std::string, std::string>> env = {}) {
    Process p = start(std::move(args), std::move(env));
    const ExitInfo exit = p.wait();
    return {exit.exited ? exit.exit_code : 128 + exit.signal, read_file(dir / "out.txt")};
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
