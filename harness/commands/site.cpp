// `harness site --out DIR`: writes the static, self-contained dashboard of the database (harness/report/site.h);
// the database is only read.
#include "harness/commands/site.h"

#include <iostream>

#include <spdlog/spdlog.h>

#include "harness/report/site.h"

namespace gpt::harness {

void add_site_command(CLI::App& app, GlobalOptions& global) {
  auto out = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("site",
                                     "write a static history dashboard of the database (no scripts, no "
                                     "network): sweeps, comparisons, benchmark histories");
  sub->add_option("--out", *out, "folder of the site (created; its pages are replaced)")->required();
  sub->callback([out, &global] {
    Store store = open_store(global, /*read_only=*/true);
    const SiteSummary site = write_site(store, *out);
    for (const auto& note : site.notes) spdlog::warn("site: {}", note);
    std::cout << "site: " << site.pages.size() << " page(s), " << site.sweeps << " sweep(s), " << site.benchmarks
              << " benchmark(s)\nindex: " << site.pages.front().string() << "\n";
    global.exit_code = kExitPass;
  });
}

}  // namespace gpt::harness
