// `harness compare` end to end with the synthetic trainer standing in for each arm's train_gpt: every arm is an
// existing "build" (--build-dir ARM=DIR, whose bin/train_gpt is a script running the synthetic trainer with that
// arm's speed), so no git checkout or compile is needed. The real build of two revisions is the `slow` test.
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "tests/harness/child_probe.h"
#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

class CompareE2E : public RecordE2E {
 protected:
  // DIR/bin/train_gpt: the synthetic trainer with this arm's mean loss and train time (same seed, same noise).
  std::string arm_build(const std::string& name, double time_ms, double mean = 3.2790, const std::string& extra = "") {
    const auto bin = dir / name / "bin";
    std::filesystem::create_directories(bin);
    const auto script = bin / "train_gpt";
    std::ofstream(script) << "#!/bin/sh\nexec " << kBin << "synthetic_trainer --time-ms " << time_ms
                          << " --time-sd 500 --mean " << mean << " --sd 0.002 " << extra << " \"$@\"\n";
    ::chmod(script.c_str(), 0755);
    return (dir / name).string();
  }

  std::vector<std::string> compare_args(const std::string& base, const std::string& cand, int runs) {
    return {"compare",
            "--baseline",
            "main",
            "--candidate",
            "feature",
            "--build-dir",
            "baseline=" + base,
            "--build-dir",
            "candidate=" + cand,
            "--runs",
            std::to_string(runs),
            "--name",
            "cmp",
            "--data",
            dir.path().string(),
            "--target",
            "3.28"};
  }

  // Arms "base" and "cand" whose trainers append their command line to DIR/<arm>-args.txt before running.
  void recording_arm_builds() {
    for (const std::string name : {"base", "cand"}) {
      arm_build(name, 100000);
      const auto script = dir / name / "bin" / "train_gpt";
      const std::string body = read_file(script);
      std::ofstream(script) << "#!/bin/sh\necho \"$@\" >> " << (dir / (name + "-args.txt")).string() << "\n"
                            << body.substr(body.find('\n') + 1);
    }
  }

  static size_t occurrences(const std::string& text, const std::string& needle) {
    size_t count = 0;
    for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++count;
    return count;
  }

  std::vector<RunRecord> compare_runs() {
    Store store = Store::open(db());
    return store.runs(store.find_sweep("cmp")->id, true);
  }
};

TEST_F(CompareE2E, SameSeedsArePairedStoredBesideTheDbAndReported) {
  const Result r = harness(compare_args(arm_build("base", 100000), arm_build("cand", 90000), 4));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("paired t (4 seeds in both arms)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Wilcoxon signed-rank"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("candidate is faster"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Welch"), std::string::npos) << r.output;
  const auto stored = compare_runs();
  ASSERT_EQ(stored.size(), 8u);
  std::map<std::string, std::set<std::int64_t>> seeds;
  for (const auto& run : stored) {
    EXPECT_EQ(run.status, RunStatus::ok) << run.reason;
    seeds[run.arm].insert(*run.seed);
    // Outputs go under the results folder beside the database (global --db), one folder per run.
    EXPECT_EQ(std::filesystem::path(run.log_path).parent_path().parent_path(), dir / "runs" / "cmp") << run.log_path;
  }
  EXPECT_EQ(seeds["baseline"], (std::set<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(seeds["candidate"], seeds["baseline"]);
  const std::string md = read_file(dir / "reports" / "cmp" / "report.md");
  EXPECT_NE(md.find("**FASTER**"), std::string::npos) << md;
  EXPECT_NE(md.find("| candidate | 3 | ok |"), std::string::npos) << md;
  EXPECT_NE(md.find("harness --db " + db().string() + " compare --baseline main --candidate feature --runs 4"),
            std::string::npos)
      << md;
  EXPECT_NE(read_file(dir / "reports" / "cmp" / "report.html").find("paired t"), std::string::npos);
  // `harness report` rewrites both from the database alone.
  std::filesystem::remove(dir / "reports" / "cmp" / "report.md");
  const Result again = harness({"report", "--sweep", "cmp"});
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(read_file(dir / "reports" / "cmp" / "report.md"), md);
}

TEST_F(CompareE2E, FailIfSlowerExitsOneOnlyForASignificantSlowdown) {
  const std::string base = arm_build("base", 100000), slow = arm_build("slow", 103000);
  auto args = compare_args(base, slow, 3);
  args.push_back("--fail-if-slower");
  const Result slower = harness(args);
  EXPECT_EQ(slower.code, 1) << slower.output;
  EXPECT_NE(slower.output.find("FAIL: the candidate is slower than 100% of the baseline time"), std::string::npos)
      << slower.output;

  // 3% slower is within an allowance of 5%.
  args = compare_args(base, slow, 3);
  args[12] = "cmp5";
  args.insert(args.end(), {"--fail-if-slower", "5"});
  const Result allowed = harness(args);
  EXPECT_EQ(allowed.code, 0) << allowed.output;
  EXPECT_NE(allowed.output.find("PASS: the runs do not show the candidate slower than 105% of the baseline time"),
            std::string::npos)
      << allowed.output;

  // Without the flag a slower candidate is reported, not failed.
  args = compare_args(base, slow, 3);
  args[12] = "plain";
  const Result plain = harness(args);
  EXPECT_EQ(plain.code, 0) << plain.output;
  EXPECT_NE(plain.output.find("candidate is slower"), std::string::npos) << plain.output;
}

TEST_F(CompareE2E, InterruptThenResumeAndExtend) {
  const std::string base = arm_build("base", 100000, 3.279, "--step-sleep-ms 25");
  const std::string cand = arm_build("cand", 99000, 3.279, "--step-sleep-ms 25");
  auto args = compare_args(base, cand, 3);
  args.push_back("--quiet");
  Process p = start(args);
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (std::filesystem::exists(db())) {
      Store store = Store::open(db());
      if (auto s = store.find_sweep("cmp"); s && store.runs(s->id).size() >= 2) break;
    }
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  ::kill(p.pid(), SIGTERM);
  const ExitInfo exit = p.wait();
  ASSERT_TRUE(exit.exited);
  const std::string out = read_file(dir / "out.txt");
  EXPECT_EQ(exit.exit_code, 130) << out;
  EXPECT_NE(out.find("harness compare --resume cmp"), std::string::npos) << out;
  const auto before = compare_runs();
  ASSERT_LT(before.size(), 6u) << "the comparison finished before the signal; the test cannot check --resume";
  int killed = 0;
  for (const auto& r : before) killed += r.status == RunStatus::killed ? 1 : 0;
  EXPECT_EQ(killed, 1) << out;  // the run in flight was ended with the harness, not left behind

  const Result resumed = harness({"compare", "--resume", "cmp", "--quiet"});
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  auto after = compare_runs();
  ASSERT_EQ(after.size(), 6u);
  for (const auto& r : after) EXPECT_EQ(r.status, RunStatus::ok) << r.reason;

  const Result extended = harness({"compare", "--resume", "cmp", "--runs", "4", "--quiet"});
  ASSERT_EQ(extended.code, 0) << extended.output;
  EXPECT_EQ(compare_runs().size(), 8u);
  EXPECT_NE(extended.output.find("paired t (4 seeds in both arms)"), std::string::npos) << extended.output;
  const Result shrink = harness({"compare", "--resume", "cmp", "--runs", "2"});
  EXPECT_EQ(shrink.code, 2) << shrink.output;
  EXPECT_NE(shrink.output.find("can only extend"), std::string::npos) << shrink.output;
}

TEST_F(CompareE2E, TimeoutParallelAndTooFewRuns) {
  const std::string base = arm_build("base", 100000);
  const std::string hung = arm_build("hung", 100000, 3.279, "--mode hang");
  auto args = compare_args(base, hung, 2);
  args.insert(args.end(), {"--timeout", "1", "--parallel", "2", "--quiet"});
  const auto start_time = std::chrono::steady_clock::now();
  const Result r = harness(args);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("no comparison: "), std::string::npos) << r.output;
  int timeouts = 0;
  for (const auto& run : compare_runs()) timeouts += run.status == RunStatus::timeout ? 1 : 0;
  EXPECT_EQ(timeouts, 2);
  EXPECT_LT(seconds, 30.0);
}

TEST_F(CompareE2E, NamedBaselineDriftIsTested) {
  const std::string base = arm_build("base", 100000, 3.2950), cand = arm_build("cand", 100000, 3.2950);
  std::filesystem::create_directories(dir / "baselines");
  std::ofstream(dir / "baselines" / "pinned.toml")
      << "binary = \"" << base
      << "/bin/train_gpt\"\nrecipe = \"tiny\"\n[published]\nruns = 80\nmean_val_loss = 3.2791\n";
  auto args = compare_args(base, cand, 4);
  args[2] = "pinned";
  args.erase(args.begin() + 5, args.begin() + 7);  // the baseline is the named one's binary
  args.insert(args.end(), {"--baselines-dir", (dir / "baselines").string()});
  const Result r = harness(args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("published baseline: n=80"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DRIFT"), std::string::npos) << r.output;
  EXPECT_NE(read_file(dir / "reports" / "cmp" / "report.md").find("**DRIFT**"), std::string::npos);
}

// A baseline measured before its recipe was renamed: its arm runs the name its own trainer knows (baseline_recipe),
// the candidate the recipe of today.
TEST_F(CompareE2E, ARenamedRecipeRunsUnderItsOldNameInTheBaselineArmOnly) {
  recording_arm_builds();
  std::filesystem::create_directories(dir / "baselines");
  std::ofstream(dir / "baselines" / "old.toml") << "binary = \"" << (dir / "base" / "bin" / "train_gpt").string()
                                                << "\"\nrecipe = \"tiny-ext\"\nbaseline_recipe = \"tiny-seed\"\n";
  auto args = compare_args((dir / "base").string(), (dir / "cand").string(), 2);
  args[2] = "old";
  args.erase(args.begin() + 5, args.begin() + 7);  // the baseline is the named one's binary
  args.insert(args.end(), {"--baselines-dir", (dir / "baselines").string()});
  const Result r = harness(args);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string base_args = read_file(dir / "base-args.txt"), cand_args = read_file(dir / "cand-args.txt");
  EXPECT_EQ(occurrences(base_args, "--recipe tiny-seed "), 2u) << base_args;
  EXPECT_EQ(occurrences(cand_args, "--recipe tiny-ext "), 2u) << cand_args;
}

// Building revisions: a git repository of two commits whose `speed.txt` differs, and a stand-in `cmake` on PATH
// that logs its arguments and "builds" bin/train_gpt as the synthetic trainer at the revision's speed, reporting
// the worktree's commit (or $FAKE_REPORTED_COMMIT) as a real build does. The real harness then compares HEAD~1
// with HEAD exactly as a user would in a fresh clone, and refuses a build that reports another commit.
TEST_F(CompareE2E, RevisionsAreBuiltWithThePresetInCachedWorktrees) {
  const auto repo = dir / "repo", fake = dir / "fakebin";
  std::filesystem::create_directories(repo / "data");
  std::filesystem::create_directories(fake);
  std::ofstream(fake / "cmake") << "#!/bin/sh\necho \"$@\" >> " << (dir / "cmake.log").string() << "\n"
                                << "if [ \"$1\" = --build ]; then\n  mkdir -p \"$2/bin\"\n"
                                << "  printf '#!/bin/sh\\nexec " << kBin
                                << "synthetic_trainer --time-ms %s --git-commit %s \"$@\"\\n' "
                                << "\"$(cat \"$(dirname \"$2\")/speed.txt\")\" "
                                << "\"${FAKE_REPORTED_COMMIT:-$(git -C \"$(dirname \"$2\")\" rev-parse HEAD)}\" "
                                << "> \"$2/bin/train_gpt\"\n"
                                << "  chmod +x \"$2/bin/train_gpt\"\nfi\n";
  ::chmod((fake / "cmake").c_str(), 0755);
  const std::string git = "cd " + repo.string() + " && git -c user.name=t -c user.email=t@t ";
  ASSERT_EQ(
      std::system((git + "init -q && echo '/data/' > .gitignore && echo '{}' > CMakePresets.json && echo 100000 > "
                         "speed.txt && git add . && git -c user.name=t -c user.email=t@t commit -qm one && "
                         "echo 90000 > speed.txt && git -c user.name=t -c user.email=t@t commit -qam two")
                      .c_str()),
      0);
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(repo);  // the harness builds the revisions of the repository it runs in
  const std::string path = fake.string() + ":" + std::getenv("PATH");
  const Result r = harness({"compare", "--baseline", "HEAD~1", "--candidate", "HEAD", "--runs", "3", "--name", "cmp",
                            "--data", (repo / "data").string(), "--target", "3.28", "--cmake-arg=-DFOO=1", "--quiet"},
                           {{"PATH", path}});
  std::filesystem::current_path(cwd);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("candidate is faster"), std::string::npos) << r.output;
  const std::string log = read_file(dir / "cmake.log");
  EXPECT_NE(log.find("--preset cpu -S " + (repo / ".cache" / "compare").string()), std::string::npos) << log;
  EXPECT_NE(log.find("/build-compare-cpu -DFOO=1"), std::string::npos) << log;
  EXPECT_NE(log.find("--build "), std::string::npos) << log;
  size_t trees = 0;
  for (const auto& tree : std::filesystem::directory_iterator(repo / ".cache" / "compare")) {
    ++trees;
    EXPECT_TRUE(std::filesystem::is_symlink(tree.path() / "data")) << tree.path();  // the tokenizer's folder
  }
  EXPECT_EQ(trees, 2u);
  Store store = Store::open(db());
  const auto params = store.params(OwnerKind::sweep, store.find_sweep("cmp")->id);
  EXPECT_EQ(params.at("baseline_sha").size(), 40u);
  EXPECT_NE(params.at("baseline_sha"), params.at("candidate_sha"));
  EXPECT_NE(r.output.find("baseline 'HEAD~1' is commit " + params.at("baseline_sha").substr(0, 12) +
                          "; every run's trainer reports it"),
            std::string::npos)
      << r.output;

  // A build whose trainer reports another commit than the revision it was built from is an error.
  std::filesystem::current_path(repo);
  const Result other = harness({"compare", "--baseline", "HEAD~1", "--candidate", "HEAD", "--runs", "2", "--name",
                                "cmp2", "--data", (repo / "data").string(), "--target", "3.28", "--quiet"},
                               {{"PATH", path}, {"FAKE_REPORTED_COMMIT", "1234567"}});
  std::filesystem::current_path(cwd);
  EXPECT_EQ(other.code, 2) << other.output;
  EXPECT_NE(other.output.find("MISMATCH: baseline 'HEAD~1' was built from commit " +
                              params.at("baseline_sha").substr(0, 12) + ", but its trainer reports 1234567"),
            std::string::npos)
      << other.output;

  std::filesystem::current_path(repo);
  const Result unknown =
      harness({"compare", "--baseline", "nosuchrev", "--candidate", "HEAD", "--runs", "2"}, {{"PATH", path}});
  std::filesystem::current_path(cwd);
  EXPECT_EQ(unknown.code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("'nosuchrev' is neither a git revision"), std::string::npos) << unknown.output;
}

// A configure step that hangs is killed at --build-timeout with everything it started, and the error names the
// step, the limit and its log.
TEST_F(CompareE2E, AHungBuildStepIsKilledAndNamed) {
  const auto repo = dir / "repo", fake = dir / "fakebin";
  std::filesystem::create_directories(repo);
  script("fakebin/cmake", hang_body(dir / "cmake_child.pid", "configuring"));
  ASSERT_EQ(std::system(("cd " + repo.string() +
                         " && git init -q && echo '{}' > CMakePresets.json && git add . && "
                         "git -c user.name=t -c user.email=t@t commit -qm one")
                            .c_str()),
            0);
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(repo);
  const auto started = std::chrono::steady_clock::now();
  const Result r = harness({"compare", "--baseline", "HEAD", "--candidate", "HEAD", "--runs", "2", "--target", "3.28",
                            "--build-timeout", "1", "--quiet"},
                           {path_with(fake)});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::filesystem::current_path(cwd);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_LT(seconds, 30.0);
  const auto cache = std::filesystem::canonical(repo) / ".cache" / "compare";
  EXPECT_NE(r.output.find("harness: error: 'cmake --preset cpu -S " + cache.string()), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/build-compare-cpu' did not finish within 1 s (--build-timeout): its process group was "
                          "killed; its output is in " +
                          cache.string()),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("/harness-configure.log"), std::string::npos) << r.output;
  const pid_t child = testing::read_pid(dir / "cmake_child.pid");
  ASSERT_GT(child, 0);
  EXPECT_TRUE(testing::ends_within(child, std::chrono::seconds(5))) << "the hung build's child outlived the harness";
}

// Without --db, compare takes $SPEEDRUN_DB as record does; runs and reports go below that database's folder, and
// the database options are accepted after the subcommand too.
TEST_F(CompareE2E, RunsAndReportsGoBelowTheSpeedrunDbFolder) {
  const std::string base = arm_build("base", 100000), cand = arm_build("cand", 90000);
  auto args = compare_args(base, cand, 2);
  args.insert(args.end(), {"--db-timeout", "2000", "--quiet"});
  const auto store_dir = dir / "elsewhere";
  const Result r = harness_without_db(args, {{"SPEEDRUN_DB", (store_dir / "cmp.db").string()}});
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(db()));
  Store store = Store::open(store_dir / "cmp.db");
  const auto stored = store.runs(store.find_sweep("cmp")->id, true);
  ASSERT_EQ(stored.size(), 4u);
  for (const auto& run : stored) {
    EXPECT_EQ(std::filesystem::path(run.log_path), store_dir / "runs" / "cmp" / run.run_id / "console.log");
  }
  EXPECT_TRUE(std::filesystem::exists(store_dir / "reports" / "cmp" / "report.md"));
  EXPECT_TRUE(std::filesystem::exists(store_dir / "reports" / "cmp" / "report.html"));
  const Result empty = harness_without_db({"compare", "--db", "", "--resume", "cmp"});
  EXPECT_EQ(empty.code, 2) << empty.output;
  EXPECT_NE(empty.output.find("--db: the path is empty"), std::string::npos) << empty.output;
}

TEST_F(CompareE2E, BadInputIsAUsageError) {
  const std::string base = arm_build("base", 100000);
  auto args = compare_args(base, base, 2);
  args[6] = "base=" + base;
  Result r = harness(args);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--build-dir: expected baseline=DIR or candidate=DIR, got 'base="), std::string::npos)
      << r.output;
  args = compare_args(base, base, 2);
  args.insert(args.end(), {"--fail-if-slower", "fast"});
  r = harness(args);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--fail-if-slower: expected an allowed slowdown in percent"), std::string::npos) << r.output;
  r = harness({"compare", "--resume", "nosuch"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--resume: no sweep 'nosuch'"), std::string::npos) << r.output;
  // The user sees the message; where in the source it was raised only with --log-level debug.
  EXPECT_EQ(r.output.find(".cpp:"), std::string::npos) << r.output;
  r = harness({"--log-level", "debug", "compare", "--resume", "nosuch"});
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("harness/commands/sweep_lifecycle.cpp:"), std::string::npos) << r.output;
  args = compare_args(base, base, 1);
  r = harness(args);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--runs"), std::string::npos) << r.output;
}

// With build folders the names are labels: the report says so rather than passing "no-such-rev" off as a commit.
TEST_F(CompareE2E, BuildDirArmsAreStatedAsLabelsWhenTheirTrainerReportsAnotherCommit) {
  auto args = compare_args(arm_build("base", 100000), arm_build("cand", 90000), 2);
  args[4] = "no-such-rev";
  const Result r = harness(args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("candidate 'no-such-rev' is a label only: the trainer in " + (dir / "cand").string() +
                          " reports 0000000, and 'no-such-rev' names no commit here"),
            std::string::npos)
      << r.output;
  const std::string md = read_file(dir / "reports" / "cmp" / "report.md");
  EXPECT_NE(md.find("- What ran: candidate 'no-such-rev' is a label only"), std::string::npos) << md;
  const std::string html = read_file(dir / "reports" / "cmp" / "report.html");
  EXPECT_NE(html.find("<h2>What ran</h2>"), std::string::npos);
  // The Reproduce line names the build folders it ran, and the report shows the trainers' own environment.
  EXPECT_NE(md.find("--build-dir baseline=" + (dir / "base").string()), std::string::npos) << md;
  EXPECT_NE(md.find("--build-dir candidate=" + (dir / "cand").string()), std::string::npos) << md;
  EXPECT_NE(md.find("## Environment"), std::string::npos) << md;
  EXPECT_NE(md.find("| git commit | 0000000 |"), std::string::npos) << md;
}

// --baseline-set / --candidate-set: one arm's recipe overrides, after --set, kept for --resume and the Reproduce line.
TEST_F(CompareE2E, PerArmOverridesReachOnlyTheirArm) {
  recording_arm_builds();
  auto args = compare_args((dir / "base").string(), (dir / "cand").string(), 2);
  args.insert(args.end(),
              {"--set", "optim.wd=0", "--candidate-set", "optim.lr=0.02", "--baseline-set", "optim.lr=0.01"});
  const Result r = harness(args);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string base_args = read_file(dir / "base-args.txt"), cand_args = read_file(dir / "cand-args.txt");
  EXPECT_NE(cand_args.find("--set optim.wd=0 --set optim.lr=0.02"), std::string::npos) << cand_args;
  EXPECT_EQ(cand_args.find("optim.lr=0.01"), std::string::npos) << cand_args;
  EXPECT_NE(base_args.find("--set optim.wd=0 --set optim.lr=0.01"), std::string::npos) << base_args;
  const std::string md = read_file(dir / "reports" / "cmp" / "report.md");
  EXPECT_NE(md.find("--set optim.wd=0 --baseline-set optim.lr=0.01 --candidate-set optim.lr=0.02"), std::string::npos)
      << md;
  // --resume keeps them: the extended runs get the same overrides (the first line is the question asked of the arm's
  // trainer before the first run, not a run).
  const Result resumed = harness({"compare", "--resume", "cmp", "--runs", "3", "--quiet"});
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  const std::string more = read_file(dir / "cand-args.txt");
  EXPECT_EQ(occurrences(more, "--print-recipe --recipe tiny --set optim.wd=0 --set optim.lr=0.02"), 1u) << more;
  EXPECT_EQ(occurrences(more, "optim.lr=0.02"), 4u) << more;
}

// --baseline-recipe / --candidate-recipe: each arm runs its own recipe (default --recipe); stored with the sweep and
// with each arm's runs, kept by --resume, stated in the report and repeated by the Reproduce line.
TEST_F(CompareE2E, PerArmRecipesReachOnlyTheirArm) {
  recording_arm_builds();
  auto args = compare_args((dir / "base").string(), (dir / "cand").string(), 2);
  args.insert(args.end(), {"--recipe", "tiny", "--candidate-recipe", "tiny-lr"});
  const Result r = harness(args);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string base_args = read_file(dir / "base-args.txt"), cand_args = read_file(dir / "cand-args.txt");
  EXPECT_EQ(occurrences(cand_args, "--recipe tiny-lr "), 2u) << cand_args;
  EXPECT_EQ(occurrences(base_args, "--recipe tiny "), 2u) << base_args;
  EXPECT_EQ(base_args.find("tiny-lr"), std::string::npos) << base_args;
  {
    Store store = Store::open(db());
    for (const auto& run : compare_runs()) {
      EXPECT_EQ(store.params(OwnerKind::run, run.id).at("arm_recipe"), run.arm == "candidate" ? "tiny-lr" : "tiny");
    }
  }
  const std::string md = read_file(dir / "reports" / "cmp" / "report.md");
  EXPECT_NE(md.find("- What ran: baseline: recipe tiny, no overrides"), std::string::npos) << md;
  EXPECT_NE(md.find("; candidate: recipe tiny-lr, no overrides"), std::string::npos) << md;
  EXPECT_NE(md.find("--recipe tiny --candidate-recipe tiny-lr"), std::string::npos) << md;
  EXPECT_NE(read_file(dir / "reports" / "cmp" / "report.html").find("candidate: recipe tiny-lr, no overrides"),
            std::string::npos);
  // --resume runs the extension with the stored recipes and refuses a new one.
  const Result changed = harness({"compare", "--resume", "cmp", "--baseline-recipe", "mini"});
  EXPECT_EQ(changed.code, 2) << changed.output;
  EXPECT_NE(changed.output.find("--baseline-recipe cannot apply"), std::string::npos) << changed.output;
  const Result resumed = harness({"compare", "--resume", "cmp", "--runs", "3", "--quiet"});
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_EQ(occurrences(read_file(dir / "cand-args.txt"), "--recipe tiny-lr "), 3u);
  EXPECT_EQ(occurrences(read_file(dir / "base-args.txt"), "--recipe tiny "), 3u);
}

// Each arm's trainer is asked about its own recipe before the first run; the default record target is read from the
// candidate's recipe (its [record] table), not the shared one.
TEST_F(CompareE2E, EachArmIsAskedAboutItsRecipeBeforeTheRuns) {
  recording_arm_builds();
  auto args = compare_args((dir / "base").string(), (dir / "cand").string(), 2);
  args.resize(args.size() - 2);  // no --target
  args.insert(args.end(), {"--recipe", "tiny", "--candidate-recipe", "tiny-lr"});
  const Result r = harness(args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(read_file(dir / "cand-args.txt").find("--print-recipe --recipe tiny-lr\n"), 0u);
  EXPECT_EQ(read_file(dir / "base-args.txt").find("--print-recipe --recipe tiny\n"), 0u);
}

// An arm whose trainer refuses its recipe or an override fails the comparison before any run (exit 2, naming the
// arm, what it was given and the trainer's complaint); no sweep is stored. The stand-in trainers answer
// --print-recipe through the real train_gpt.
TEST_F(CompareE2E, ARefusedRecipeOrOverrideFailsBeforeAnyRun) {
  ASSERT_TRUE(std::filesystem::exists(kBin + "train_gpt")) << "build the train_gpt target first";
  for (const std::string name : {"base", "cand"}) {
    arm_build(name, 100000);
    const auto script = dir / name / "bin" / "train_gpt";
    const std::string body = read_file(script);
    std::ofstream(script) << "#!/bin/sh\n[ \"$1\" = --print-recipe ] && exec " << kBin << "train_gpt \"$@\"\n"
                          << body.substr(body.find('\n') + 1);
  }
  auto args = compare_args((dir / "base").string(), (dir / "cand").string(), 2);
  args.insert(args.end(), {"--recipe", "tiny", "--candidate-recipe", "no-such-recipe"});
  const Result recipe = harness(args);
  EXPECT_EQ(recipe.code, 2) << recipe.output;
  EXPECT_NE(recipe.output.find("the candidate arm's trainer"), std::string::npos) << recipe.output;
  EXPECT_NE(recipe.output.find("refuses `--recipe no-such-recipe`"), std::string::npos) << recipe.output;
  EXPECT_NE(recipe.output.find("no-such-recipe"), std::string::npos) << recipe.output;
  EXPECT_NE(recipe.output.find("nothing was run"), std::string::npos) << recipe.output;

  args = compare_args((dir / "base").string(), (dir / "cand").string(), 2);
  args.insert(args.end(), {"--recipe", "tiny", "--baseline-set", "optim.no_such_key=1"});
  const Result set = harness(args);
  EXPECT_EQ(set.code, 2) << set.output;
  EXPECT_NE(set.output.find("the baseline arm's trainer"), std::string::npos) << set.output;
  EXPECT_NE(set.output.find("--set optim.no_such_key=1"), std::string::npos) << set.output;

  args = compare_args((dir / "base").string(), (dir / "cand").string(), 2);
  *(std::find(args.begin(), args.end(), "--data") + 1) = (dir / "no-such-folder").string();
  const Result data = harness(args);
  EXPECT_EQ(data.code, 2) << data.output;
  EXPECT_NE(data.output.find("--data: no folder"), std::string::npos) << data.output;
  if (std::filesystem::exists(db())) {
    Store store = Store::open(db());
    EXPECT_FALSE(store.find_sweep("cmp").has_value()) << "a refused comparison stored a sweep";
  }
}

// Every option given with --resume applies or is refused: --fail-if-slower and --timeout apply to the resumed
// comparison (both were silently ignored), a setting of the stored comparison such as --alpha is an error.
TEST_F(CompareE2E, FailIfSlowerIsHonouredOnResume) {
  const Result first = harness(compare_args(arm_build("base", 100000), arm_build("slow", 103000), 3));
  ASSERT_EQ(first.code, 0) << first.output;
  const Result alpha = harness({"compare", "--resume", "cmp", "--alpha", "0.05", "--target", "3.3"});
  EXPECT_EQ(alpha.code, 2) << alpha.output;
  EXPECT_NE(alpha.output.find("--alpha, --target cannot apply"), std::string::npos) << alpha.output;
  const Result timeout = harness({"compare", "--resume", "cmp", "--timeout", "77", "--quiet"});
  EXPECT_EQ(timeout.code, 0) << timeout.output;
  Store store = Store::open(db());
  EXPECT_EQ(std::stod(store.params(OwnerKind::sweep, store.find_sweep("cmp")->id).at("timeout_s")), 77.0);
  const Result resumed = harness({"compare", "--resume", "cmp", "--fail-if-slower", "--quiet"});
  EXPECT_EQ(resumed.code, 1) << resumed.output;
  EXPECT_NE(resumed.output.find("FAIL: the candidate is slower than 100% of the baseline time"), std::string::npos)
      << resumed.output;
}

// Per-arm overrides make the arms run different recipes: every report names each arm's overrides and the recipe
// hash its trainer reported, never "recipe tiny in both arms"; the record check reads the same in the terminal,
// Markdown and HTML; the Reproduce line names the database.
TEST_F(CompareE2E, WhatRanNamesEachArmsOverridesAndRecipeHash) {
  // The candidate's mean 3.2790 is below the target 3.28 but two runs cannot show it (p ~ 0.3): not established.
  auto args = compare_args(arm_build("base", 100000, 3.2790, "--recipe-hash 1111aaaa"),
                           arm_build("cand", 100000, 3.2790, "--recipe-hash 2222bbbb"), 2);
  args.insert(args.end(),
              {"--set", "optim.wd=0", "--baseline-set", "optim.lr=0.01", "--candidate-set", "optim.lr=0.02"});
  const Result r = harness(args);
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string md = read_file(dir / "reports" / "cmp" / "report.md");
  const std::string html = read_file(dir / "reports" / "cmp" / "report.html");
  const std::string what_ran =
      "baseline: recipe tiny, overrides optim.wd=0 optim.lr=0.01, recipe hash 1111aaaa; "
      "candidate: recipe tiny, overrides optim.wd=0 optim.lr=0.02, recipe hash 2222bbbb";
  for (const std::string* text : {&r.output, &md, &html}) {
    EXPECT_NE(text->find(what_ran), std::string::npos) << *text;
    EXPECT_EQ(text->find("recipe tiny in both arms"), std::string::npos) << *text;
  }
  // One wording of the record check, from one place: what the Markdown says, the HTML badge and the terminal say.
  const std::string verdict = "not established: the candidate's mean final val loss 3.2";
  const size_t at = md.find(verdict);
  ASSERT_NE(at, std::string::npos) << md;
  const std::string sentence = md.substr(at, md.find("**", at) - at);
  EXPECT_NE(sentence.find("is not shown below the target 3.2800 (one-sided t p = "), std::string::npos) << sentence;
  EXPECT_NE(r.output.find("record check: " + sentence), std::string::npos) << r.output;
  std::string escaped;  // as the HTML writes it
  for (char c : sentence) {
    escaped += c == '\'' ? "&apos;" : c == '>' ? "&gt;" : c == '<' ? "&lt;" : std::string(1, c);
  }
  EXPECT_NE(html.find("record check: " + escaped), std::string::npos) << html;
  EXPECT_EQ(html.find("does not reach"), std::string::npos);
  EXPECT_NE(md.find("Reproduce: `harness --db " + db().string() + " compare --baseline main"), std::string::npos) << md;
}

// `--` ends the harness's options also right after an option's optional value (`--fail-if-slower 5 -- CMD`):
// the command keeps its own flags (here --seed, which compare also knows) instead of handing them to the harness.
TEST_F(CompareE2E, DashesAfterAnOptionalValueEndTheHarnessOptions) {
  auto args = compare_args(arm_build("base", 100000), arm_build("cand", 100000), 2);
  args.insert(args.end(), {"--fail-if-slower", "5", "--", "{bin}", "--seed", "{seed}", "--run-id", "{run_id}", "--out",
                           "{out}", "--steps", "12"});
  const Result r = harness(args);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("slowdown check: PASS"), std::string::npos) << r.output;
  Store store = Store::open(db());
  const auto sweep = store.find_sweep("cmp");
  ASSERT_TRUE(sweep);
  EXPECT_NE(sweep->command.find("\"--run-id\",\"{run_id}\""), std::string::npos) << sweep->command;
  EXPECT_DOUBLE_EQ(std::stod(store.params(OwnerKind::sweep, sweep->id).at("fail_if_slower_pct")), 5.0);
  const auto stored = compare_runs();
  ASSERT_EQ(stored.size(), 4u);
  for (const auto& run : stored) {
    EXPECT_EQ(run.status, RunStatus::ok) << run.reason;
    EXPECT_EQ(run.steps, 12);  // the command's own --steps reached it
  }
}

}  // namespace
}  // namespace gpt::harness
