// `harness import PATH...`: speedrun-format logs (files, or folders searched recursively) into one sweep,
// one arm per folder (named by its path below the import root), followed by the same report as `record`.
// Each log's content hash is kept, so importing the same log again is skipped (or, when nothing is new,
// the earlier sweep is reported). The import is one transaction: a killed import leaves nothing behind.
#include "harness/commands/import.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>

#include <spdlog/spdlog.h>

#include "harness/commands/common.h"
#include "harness/launcher/safe_names.h"
#include "harness/logparse/experiment.h"
#include "harness/logparse/logparse.h"
#include "harness/logparse/run_summary.h"
#include "harness/record/harvest.h"
#include "harness/report/html_report.h"
#include "harness/report/sweep_report.h"
#include "base/check.h"
#include "base/file_read.h"

namespace gpt::harness {

namespace {

struct ImportOptions {
  std::vector<std::string> paths;
  std::string name;
  double target = 3.28;
  double alpha = 0.01;
  bool track3 = false;
  std::int64_t early_stop_step = 0;
  std::string format = "text";
};

struct LogFile {
  std::string arm;
  std::filesystem::path path;
  bool operator<(const LogFile& o) const { return std::tie(arm, path) < std::tie(o.arm, o.path); }
};

// The extension, not the end of the name: "catalog" (no extension) or a README is no log.
bool looks_like_log(const std::filesystem::path& p) {
  const auto ext = p.extension().string();
  return ext == ".txt" || ext == ".log";
}

// The arm of a log found under `root`: its folder's path below the root ("2026-01-18_X/baseline"), or the
// root's own name for logs directly in it. Same-named folders of different records stay different arms.
std::string arm_below(const std::filesystem::path& root, const std::filesystem::path& file) {
  const auto folder = file.parent_path().lexically_relative(root).generic_string();
  if (folder.empty() || folder == ".") return std::filesystem::absolute(root).lexically_normal().filename().string();
  return folder;
}

std::vector<LogFile> collect_logs(const std::vector<std::string>& paths) {
  std::vector<LogFile> files;
  for (const auto& text : paths) {
    const std::filesystem::path path(text);
    GPT_CHECK(std::filesystem::exists(path), "import: no such file or folder '", text, "'");
    if (std::filesystem::is_regular_file(path)) {
      files.push_back({std::filesystem::absolute(path).parent_path().filename().string(), path});
      continue;
    }
    // A device, FIFO or socket (/dev/null) is neither: the folder walk below would fail with a library error.
    GPT_CHECK(std::filesystem::is_directory(path), "import: '", text, "' is neither a log file nor a folder of them");
    for (const auto& entry : std::filesystem::recursive_directory_iterator(path)) {
      if (!entry.is_regular_file() || !looks_like_log(entry.path())) continue;
      files.push_back({arm_below(path, entry.path()), entry.path()});
    }
  }
  std::sort(files.begin(), files.end());
  GPT_CHECK(!files.empty(), "import: no log files (*.txt, *.log) found under the given paths");
  return files;
}

// Content hash -> (sweep name, path) of every log imported before.
std::map<std::string, std::pair<std::string, std::string>> imported_hashes(Store& store) {
  auto s = store.db().prepare(
      "SELECT p.value, s.name, r.log_path FROM params p JOIN runs r ON r.id = p.owner_id "
      "JOIN sweeps s ON s.id = r.sweep_id WHERE p.owner_kind = 'run' AND p.key = 'content_hash'");
  std::map<std::string, std::pair<std::string, std::string>> out;
  while (s.step()) out.emplace(s.column_text(0), std::make_pair(s.column_text(1), s.column_text(2)));
  return out;
}

int report_sweep(Store& store, const SweepInfo& sweep, const ImportOptions& o, GlobalOptions& global) {
  const SweepReport report = build_sweep_report(store, sweep, ReportOptions{o.target, o.alpha, o.track3});
  const auto dir = sweep_reports_dir(global, sweep.name);
  const auto md = write_report_files(report, dir);
  const auto html = write_sweep_html(store, report, dir);
  if (o.format == "json") {
    auto doc = to_json(report);
    doc["report_path"] = md.string();
    doc["html_report_path"] = html.string();
    std::cout << doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << render_text(report) << "report: " << html.string() << "\nmarkdown: " << md.string() << "\n";
  }
  return report.pass ? kExitPass : kExitFail;
}

int run_import(const ImportOptions& o, GlobalOptions& global) {
  const auto files = collect_logs(o.paths);
  Store store = open_store(global);
  const auto known = imported_hashes(store);

  struct NewLog {
    LogFile file;
    std::string hash;
    std::string text;
    std::vector<ParsedLog> runs{};
    std::optional<RunSummary> summary{};  // the trainer's OUT/ID.json beside a one-run OUT/ID.txt
  };
  std::vector<NewLog> fresh;
  std::map<std::string, int> duplicates_by_sweep;
  for (const auto& file : files) {
    std::string text = read_file(file.path, "log file");
    std::string hash = sha1_hex(text);  // the identity of a log across imports
    if (auto it = known.find(hash); it != known.end()) {
      ++duplicates_by_sweep[it->second.first];
      spdlog::info("skipped '{}': the same log was imported before (sweep \"{}\", {})", file.path.string(),
                   it->second.first, it->second.second);
      continue;
    }
    if (std::any_of(fresh.begin(), fresh.end(), [&](const NewLog& n) { return n.hash == hash; })) {
      spdlog::info("skipped '{}': a copy of another log in this import", file.path.string());
      continue;
    }
    fresh.push_back({file, std::move(hash), std::move(text)});
  }
  if (fresh.empty()) {
    // Nothing new: show the sweep that holds (most of) these logs instead of making an empty one.
    const auto most = std::max_element(duplicates_by_sweep.begin(), duplicates_by_sweep.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    GPT_CHECK(most != duplicates_by_sweep.end(), "import: no new logs");
    spdlog::info("import: all {} log(s) were imported before; reporting sweep \"{}\"", files.size(), most->first);
    return report_sweep(store, *store.find_sweep(most->first), o, global);
  }

  const LogParseOptions parse_options{o.early_stop_step > 0 ? std::optional<std::int64_t>(o.early_stop_step)
                                                            : std::nullopt};
  // Arms by what the runs are: a folder that mixes step counts, code or recipes is split, and says so.
  std::vector<ExperimentKey> keys;
  for (auto& log : fresh) {
    log.runs = parse_log(log.text, parse_options);
    // The trainer's OUT/ID.json beside its OUT/ID.txt carries provenance (commit, recipe hash, world size).
    const auto summary_path = std::filesystem::path(log.file.path).replace_extension(".json");
    if (log.runs.size() == 1 && std::filesystem::exists(summary_path)) {
      try {
        log.summary = read_run_summary(summary_path);
      } catch (const gpt::Error& e) {
        spdlog::warn("ignored the run summary beside '{}': {}", log.file.path.string(), e.what());
      }
    }
    const std::string code = log_code_hash(log.text);
    for (const auto& run : log.runs) {
      keys.push_back({log.file.arm, run.total_steps, code, log.summary ? log.summary->recipe_hash : ""});
    }
  }
  const ExperimentArms arms = experiment_arms(keys);
  for (const auto& note : arms.notes) spdlog::info("{}", note);
  SweepInfo sweep;
  int imported = 0;
  {
    sql::Transaction all(store.db());  // one unit: a killed or failed import stores nothing
    sweep.name =
        o.name.empty() ? to_path_name("import-" + std::filesystem::path(o.paths.front()).filename().string()) : o.name;
    sweep.kind = "import";
    sweep.target = o.target;
    sweep.alpha = o.alpha;
    store.create_sweep_unique(sweep, /*name_given=*/!o.name.empty());
    if (o.track3) store.add_tag(OwnerKind::sweep, sweep.id, "track3");
    if (o.early_stop_step > 0) {
      store.set_param(OwnerKind::sweep, sweep.id, "early_stop_step", std::to_string(o.early_stop_step));
    }
    for (const auto& note : arms.notes) store.add_tag(OwnerKind::sweep, sweep.id, note);
    size_t key = 0;
    for (const auto& log : fresh) {
      const auto& runs = log.runs;
      const auto& summary = log.summary;
      for (size_t i = 0; i < runs.size(); ++i) {
        RunRecord r = record_from_log(runs[i], std::filesystem::absolute(log.file.path));
        if (summary) {
          const auto conflict = summary_log_conflict(runs[i], *summary, log.file.path.stem().string());
          apply_run_summary(r, *summary, parse_options.early_stop_step);
          if (conflict) {
            r.status = RunStatus::failed;
            r.reason = *conflict;
          }
          // Kept as a param, not the seed column: two logs of one arm may share a seed.
          if (summary->seed) r.params["seed"] = std::to_string(*summary->seed);
        }
        r.sweep_id = sweep.id;
        r.arm = arms.arms[key];
        if (!keys[key].code_hash.empty()) r.params["code_hash"] = keys[key].code_hash;
        ++key;
        r.run_id = log.file.path.stem().string() + (runs.size() > 1 ? "#" + std::to_string(i + 1) : "");
        r.params["content_hash"] = log.hash;
        if (runs.size() > 1) r.params["run_in_file"] = std::to_string(i + 1);
        store.add_run(r);
        ++imported;
      }
    }
    store.set_runs_planned(sweep.id, imported);
    all.commit();
  }
  sweep = *store.find_sweep(std::to_string(sweep.id));
  const size_t duplicates = files.size() - fresh.size();
  spdlog::info("imported {} run(s) from {} file(s) into sweep {} \"{}\"{}", imported, fresh.size(), sweep.id,
               sweep.name, duplicates > 0 ? "; " + std::to_string(duplicates) + " file(s) skipped as duplicates" : "");
  return report_sweep(store, sweep, o, global);
}

}  // namespace

void add_import_command(CLI::App& app, GlobalOptions& global) {
  auto opts = std::make_shared<ImportOptions>();
  CLI::App* sub = app.add_subcommand(
      "import", "import speedrun-format logs into one sweep (one arm per folder below the import root)");
  sub->add_option("paths", opts->paths, "log files or folders (searched recursively for *.txt, *.log)")->required();
  add_sweep_name_option(*sub, opts->name, "sweep name (default import-<first path>)");
  sub->add_option("--target", opts->target, "target val loss (default 3.28)")->check(finite_in(0, kMaxTargetLoss));
  sub->add_option("--alpha", opts->alpha, "significance level (default 0.01)")->check(finite_in(1e-12, 0.999999));
  sub->add_flag("--track3", opts->track3, "judge with the track-3 rule");
  sub->add_option("--early-stop-step", opts->early_stop_step,
                  "opt-in early-stop rule: a run ending on a validation at this step is complete")
      ->check(whole_in(1, std::numeric_limits<std::int64_t>::max()));
  sub->add_option("--format", opts->format, "report format")->check(CLI::IsMember({"text", "json"}));
  sub->callback([opts, &global] { global.exit_code = run_import(*opts, global); });
}

}  // namespace gpt::harness
