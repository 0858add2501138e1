#pragma once
// Headless Chromium for the HTML tests: renders a page to a screenshot and collects its console lines, so a page
// that breaks (a script error, a missing resource) is caught. Tests skip, with the reason, without chromium.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness/launcher/slurm_util.h"
#include "tests/harness/temp_dir.h"

namespace gpt::harness::browser {

using testing::TempDir;

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

// What headless Chromium made of a page: its console lines and the PNG bytes of its screenshot.
struct BrowserRun {
  std::vector<std::string> console;
  std::string png;
  std::string stderr_text;
};

// Renders an existing page (its links to other files of a site resolve beside it).
inline BrowserRun render_file(const TempDir& dir, const std::string& name, const std::filesystem::path& page) {
  const auto png = dir / (name + ".png");
  const auto r =
      slurm::run_command({"timeout", "90", "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                          "--user-data-dir=" + (dir / ("profile-" + name)).string(), "--enable-logging=stderr", "--v=0",
                          "--window-size=1200,1600", "--screenshot=" + png.string(), "file://" + page.string()});
  BrowserRun run;
  run.stderr_text = r.err;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    if (line.find(":CONSOLE") != std::string::npos) run.console.push_back(line);
  }
  run.png = read_file(png);
  return run;
}

// Writes `html` to DIR/NAME.html and renders it.
inline BrowserRun render(const TempDir& dir, const std::string& name, const std::string& html) {
  const auto page = dir / (name + ".html");
  write_file(page, html);
  return render_file(dir, name, page);
}

inline bool have_chromium() { return slurm::run_command({"sh", "-c", "command -v chromium"}).status == 0; }

inline void expect_png(const std::string& png, const std::string& what) {
  ASSERT_GT(png.size(), 10000u) << what << ": screenshot missing or tiny";
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << what;
  // IHDR width and height (big-endian) are the window size.
  auto be32 = [&](std::size_t at) {
    return (static_cast<unsigned char>(png[at]) << 24) | (static_cast<unsigned char>(png[at + 1]) << 16) |
           (static_cast<unsigned char>(png[at + 2]) << 8) | static_cast<unsigned char>(png[at + 3]);
  };
  EXPECT_EQ(be32(16), 1200u) << what;
  EXPECT_EQ(be32(20), 1600u) << what;
}

}  // namespace gpt::harness::browser
