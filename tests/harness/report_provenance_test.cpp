// Reports say exactly what ran: each run's own environment as its trainer reported it (not the harness's probe of
// the submitting machine), a note when runs differ, and Reproduce lines that repeat every stored option.
#include <gtest/gtest.h>

#include "harness/report/html_report.h"
#include "harness/report/provenance.h"
#include "harness/report/sweep_report.h"
#include "tests/harness/temp_dir.h"

namespace gpt::harness {
namespace {

using testing::TempDir;

Environment probe() {
  Environment e;
  e.git_commit = "";
  e.cuda = "13.0";
  e.nccl = "2";
  e.build_flags = "NDEBUG";
  e.hostname = "submit-host";
  return e;
}

Environment trainer(const std::string& commit, bool dirty = false) {
  Environment e;
  e.git_commit = commit;
  e.git_dirty = dirty;
  e.build_flags = "RelWithDebInfo";
  e.hostname = "node-1";
  return e;
}

struct StoredSweep {
  TempDir dir;
  Store store = Store::open(dir / "h.db");
  SweepInfo sweep;
};

// A record sweep whose sweep row carries the probe; run i reports `envs[i]` (nullopt: the trainer wrote none).
void fill(StoredSweep& s, const std::vector<std::optional<Environment>>& envs) {
  s.sweep.name = "prov";
  s.sweep.kind = "record";
  s.sweep.recipe = "tiny";
  s.sweep.environment_id = s.store.upsert_environment(probe());
  s.sweep.id = s.store.create_sweep(s.sweep);
  for (size_t i = 0; i < envs.size(); ++i) {
    RunRecord r;
    r.sweep_id = s.sweep.id;
    r.seed = static_cast<std::int64_t>(i);
    r.run_id = "prov-seed" + std::to_string(i);
    r.status = RunStatus::ok;
    r.final_val_loss = 3.27 + 0.001 * static_cast<double>(i);
    r.train_time_ms = 1000;
    r.environment_id = s.sweep.environment_id;
    r.environment = envs[i];
    if (envs[i] && !envs[i]->git_commit.empty()) r.params["trainer_commit"] = envs[i]->git_commit;
    s.store.add_run(r);
  }
}

TEST(ReportProvenance, ShowsTheTrainersEnvironmentNotTheHarnessProbe) {
  StoredSweep s;
  fill(s, {trainer("bffc9f5"), trainer("bffc9f5")});
  const SweepReport rep = build_sweep_report(s.store, s.sweep, ReportOptions{});
  ASSERT_EQ(rep.provenance.groups.size(), 1u);
  EXPECT_TRUE(rep.provenance.groups[0].from_trainer);
  const std::string md = render_markdown(rep, {});
  EXPECT_NE(md.find("bffc9f5"), std::string::npos) << md;
  EXPECT_NE(md.find("RelWithDebInfo"), std::string::npos) << md;
  EXPECT_EQ(md.find("13.0"), std::string::npos) << md;  // the probe's CUDA is not what ran
  EXPECT_NE(md.find("Every run had the same environment."), std::string::npos) << md;
  const nlohmann::json j = to_json(rep);
  EXPECT_FALSE(j.at("provenance").at("runs_differ").get<bool>());
  EXPECT_EQ(j.at("provenance").at("environments")[0].at("git_commit"), "bffc9f5");
  EXPECT_EQ(j.at("provenance").at("environments")[0].at("source"), "trainer");
  EXPECT_NE(render_text(rep).find("git commit bffc9f5"), std::string::npos) << render_text(rep);

  const std::string html = render_sweep_html(rep, HtmlContext{rep.provenance, ""});
  EXPECT_NE(html.find("bffc9f5"), std::string::npos);
  EXPECT_EQ(html.find("13.0"), std::string::npos);
}

TEST(ReportProvenance, RunsThatDifferAreNamedWithTheFieldsThatDiffer) {
  StoredSweep s;
  fill(s, {trainer("aaaa111"), trainer("bbbb222", true), trainer("aaaa111")});
  const SweepReport rep = build_sweep_report(s.store, s.sweep, ReportOptions{});
  ASSERT_EQ(rep.provenance.groups.size(), 2u);
  EXPECT_EQ(rep.provenance.groups[0].runs, (std::vector<std::string>{"seed 0", "seed 2"}));
  EXPECT_EQ(rep.provenance.groups[1].runs, (std::vector<std::string>{"seed 1"}));
  EXPECT_EQ(rep.provenance.differing_fields, (std::vector<std::string>{"git commit"}));
  const std::string md = render_markdown(rep, {});
  EXPECT_NE(md.find("The runs differ in: git commit."), std::string::npos) << md;
  EXPECT_NE(md.find("bbbb222 (with uncommitted changes)"), std::string::npos) << md;
  const std::string html = render_sweep_html(rep, HtmlContext{rep.provenance, ""});
  EXPECT_NE(html.find("The runs differ in: git commit."), std::string::npos);
  EXPECT_NE(html.find("class=\"differs\""), std::string::npos);
  EXPECT_TRUE(to_json(rep).at("provenance").at("runs_differ").get<bool>());
}

TEST(ReportProvenance, ARunWithoutATrainerReportIsLabelledAsTheHarnessProbe) {
  StoredSweep s;
  fill(s, {std::nullopt, trainer("cccc333")});
  const SweepReport rep = build_sweep_report(s.store, s.sweep, ReportOptions{});
  ASSERT_EQ(rep.provenance.groups.size(), 2u);
  EXPECT_FALSE(rep.provenance.groups[0].from_trainer);
  EXPECT_TRUE(rep.provenance.groups[1].from_trainer);
  const std::string md = render_markdown(rep, {});
  EXPECT_NE(md.find("the harness's probe of the submitting machine (the trainer reported none)"), std::string::npos)
      << md;
  EXPECT_NE(md.find("source (trainer report or harness probe)"), std::string::npos) << md;
}

// The Reproduce line of a comparison repeats the build folders, the trainer options and the run settings.
TEST(ReportProvenance, CompareReproduceLineKeepsEveryOption) {
  SweepInfo sweep;
  sweep.kind = "compare";
  sweep.recipe = "tiny";
  sweep.runs_planned = 8;
  sweep.gpus = 2;
  sweep.command = nlohmann::json(std::vector<std::string>{"{bin}", "--recipe", "{recipe}", "--seed", "{seed}",
                                                          "--backend", "cpu", "--set", "optim.lr=0.01"})
                      .dump();
  const std::string cmd = reproduce_command(sweep, {{"baseline", "main"},
                                                    {"candidate", "HEAD"},
                                                    {"baseline_build_dir", "/b/base"},
                                                    {"candidate_build_dir", "/b/my branch"},
                                                    {"timeout_s", "600.000000"},
                                                    {"fail_if_slower_pct", "2"}});
  EXPECT_NE(cmd.find("--runs 4"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--build-dir baseline=/b/base"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--build-dir 'candidate=/b/my branch'"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--gpus 2"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--timeout 600"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--backend cpu"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--set optim.lr=0.01"), std::string::npos) << cmd;
  EXPECT_NE(cmd.find("--fail-if-slower 2"), std::string::npos) << cmd;

  sweep.command = nlohmann::json(std::vector<std::string>{"./my_trainer", "--seed", "{seed}"}).dump();
  EXPECT_NE(reproduce_command(sweep, {{"baseline", "a"}, {"candidate", "b"}}).find(" -- ./my_trainer --seed {seed}"),
            std::string::npos);
}

}  // namespace
}  // namespace gpt::harness
