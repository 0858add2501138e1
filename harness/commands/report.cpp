// `harness report --sweep ID`: (re)writes a stored sweep's reports from the database: report.html (self-contained)
// beside report.md/report.json for record and import sweeps, or the comparison page for a compare sweep.
#include "harness/commands/report.h"

#include <iostream>

#include "harness/report/comparison_report.h"
#include "harness/report/html_report.h"
#include "base/check.h"

namespace gpt::harness {

namespace {

struct ReportCommandOptions {
  std::string sweep;
  std::string out;
  double power = 0.8;
};

int run_report(const ReportCommandOptions& o, GlobalOptions& global) {
  Store store = open_store(global, /*read_only=*/true);
  const auto sweep = store.find_sweep(o.sweep);
  GPT_CHECK(sweep.has_value(), "--sweep: no sweep '", o.sweep, "' in '", resolve_db_path(global.db).string(), "'");
  const auto dir = o.out.empty() ? sweep_reports_dir(global, sweep->name) : std::filesystem::path(o.out);
  std::error_code ec;
  GPT_CHECK(!std::filesystem::exists(dir, ec) || std::filesystem::is_directory(dir, ec), "--out: '", dir.string(),
            "' exists and is not a folder (the reports are written into a folder)");
  if (sweep->kind == "compare") {
    const auto page = comparison_page_from_store(store, *sweep, stored_comparison_settings(store, *sweep));
    const auto files = write_comparison_reports(store, *sweep, page, dir);
    std::cout << "report: " << files.html.string() << "\nmarkdown: " << files.markdown.string() << "\n";
    return kExitPass;
  }
  ReportOptions options;
  if (sweep->target) options.target = *sweep->target;
  if (sweep->alpha) options.alpha = *sweep->alpha;
  options.track3 = store.params(OwnerKind::sweep, sweep->id).count("track3") &&
                   store.params(OwnerKind::sweep, sweep->id).at("track3") == "1";
  options.power = o.power;
  const SweepReport report = build_sweep_report(store, *sweep, options);
  const auto md = write_report_files(report, dir);
  const auto html = write_sweep_html(store, report, dir);
  std::cout << "report: " << html.string() << "\nmarkdown: " << md.string() << "\n";
  return kExitPass;
}

}  // namespace

void add_report_command(CLI::App& app, GlobalOptions& global) {
  auto opts = std::make_shared<ReportCommandOptions>();
  CLI::App* sub = app.add_subcommand("report", "write a stored sweep's reports (HTML, Markdown, JSON)");
  sub->add_option("--sweep", opts->sweep, "sweep id or name")->required();
  sub->add_option("--out", opts->out, "folder for the reports (default <db folder>/reports/<sweep>)");
  sub->add_option("--power", opts->power, "wanted power of the power-analysis section (default 0.8)")
      ->check(finite_in(1e-6, 0.999999));
  sub->callback([opts, &global] { global.exit_code = run_report(*opts, global); });
}

}  // namespace gpt::harness
