// `harness import PATH...`: speedrun-format logs (files, or folders searched recursively) into one sweep,
// one arm per folder, followed by the same report as `record`.
#include <algorithm>
#include <iostream>

#include "harness/commands/common.h"
#include "harness/logparse/logparse.h"
#include "harness/record/harvest.h"
#include "harness/report/sweep_report.h"
#include "kernels/check.h"

namespace gpt::harness {

namespace {

struct ImportOptions {
  std::vector<std::string> paths;
  std::string name;
  double target = 3.28;
  double alpha = 0.01;
  bool track3 = false;
  std::string format = "text";
};

bool looks_like_log(const std::filesystem::path& p) {
  const auto ext = p.extension().string();
  return ext == ".txt" || ext == ".log" || ext.empty();
}

// (arm, file) pairs, sorted so imports are reproducible.
std::vector<std::pair<std::string, std::filesystem::path>> collect_logs(const std::vector<std::string>& paths) {
  std::vector<std::pair<std::string, std::filesystem::path>> files;
  for (const auto& text : paths) {
    const std::filesystem::path path(text);
    GPT_CHECK(std::filesystem::exists(path), "import: no such file or folder '", text, "'");
    if (std::filesystem::is_regular_file(path)) {
      files.emplace_back(std::filesystem::absolute(path).parent_path().filename().string(), path);
      continue;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(path)) {
      if (!entry.is_regular_file() || !looks_like_log(entry.path())) continue;
      files.emplace_back(entry.path().parent_path().filename().string(), entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  GPT_CHECK(!files.empty(), "import: no log files (*.txt, *.log) found under the given paths");
  return files;
}

int run_import(const ImportOptions& o, GlobalOptions& global) {
  const auto files = collect_logs(o.paths);
  Store store = open_store(global);
  SweepInfo sweep;
  std::string base = o.name.empty() ? "import-" + std::filesystem::path(o.paths.front()).filename().string() : o.name;
  sweep.name = base;
  for (int i = 2; store.find_sweep(sweep.name); ++i) sweep.name = base + "-" + std::to_string(i);
  sweep.kind = "import";
  sweep.target = o.target;
  sweep.alpha = o.alpha;
  sweep.id = store.create_sweep(sweep);
  sweep = *store.find_sweep(std::to_string(sweep.id));
  if (o.track3) store.add_tag(OwnerKind::sweep, sweep.id, "track3");

  int imported = 0;
  for (const auto& [arm, file] : files) {
    const auto runs = parse_log_file(file);
    for (size_t i = 0; i < runs.size(); ++i) {
      RunRecord r = record_from_log(runs[i], std::filesystem::absolute(file));
      r.sweep_id = sweep.id;
      r.arm = arm;
      r.run_id = file.stem().string() + (runs.size() > 1 ? "#" + std::to_string(i + 1) : "");
      store.add_run(r);
      ++imported;
    }
  }
  std::cerr << "imported " << imported << " run(s) from " << files.size() << " file(s) into sweep " << sweep.id << " \""
            << sweep.name << "\"\n";
  const SweepReport report = build_sweep_report(store, sweep, ReportOptions{o.target, o.alpha, o.track3});
  const auto md = write_report_files(report, results_dir(global) / "reports" / sweep.name);
  if (o.format == "json") {
    auto doc = to_json(report);
    doc["report_path"] = md.string();
    std::cout << doc.dump(2) << "\n";
  } else {
    std::cout << render_text(report) << "report: " << md.string() << "\n";
  }
  return report.pass ? kExitPass : kExitFail;
}

}  // namespace

void add_import_command(CLI::App& app, GlobalOptions& global) {
  auto opts = std::make_shared<ImportOptions>();
  CLI::App* sub = app.add_subcommand("import", "import speedrun-format logs into one sweep (one arm per folder)");
  sub->add_option("paths", opts->paths, "log files or folders (searched recursively for *.txt, *.log)")->required();
  sub->add_option("--name", opts->name, "sweep name (default import-<first path>)");
  sub->add_option("--target", opts->target, "target val loss (default 3.28)");
  sub->add_option("--alpha", opts->alpha, "significance level (default 0.01)")->check(CLI::Range(1e-12, 0.999999));
  sub->add_flag("--track3", opts->track3, "judge with the track-3 rule");
  sub->add_option("--format", opts->format, "report format")->check(CLI::IsMember({"text", "json"}));
  sub->callback([opts, &global] { global.exit_code = run_import(*opts, global); });
}

}  // namespace gpt::harness
