#include "harness/launcher/command.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "base/file_read.h"

namespace gpt::harness {
namespace {

// $TMPDIR (else /tmp), checked here: std::filesystem::temp_directory_path() throws a library error that names
// neither TMPDIR nor what to do.
std::filesystem::path temp_folder() {
  const char* env = std::getenv("TMPDIR");
  const std::filesystem::path folder = env != nullptr && *env != '\0' ? env : "/tmp";
  std::error_code ec;
  GPT_CHECK(std::filesystem::is_directory(folder, ec), "TMPDIR: '", folder.string(),
            "' is not a folder (commands' output is captured in a temporary file there; set TMPDIR to an existing "
            "folder, or unset it for /tmp)");
  return folder;
}

// A temporary file for a child's captured output, removed when the object goes out of scope.
class CaptureFile {
 public:
  CaptureFile() {
    const std::filesystem::path folder = temp_folder();
    std::string name = (folder / "harness-capture-XXXXXX").string();
    const int fd = ::mkstemp(name.data());
    GPT_CHECK(fd >= 0, "TMPDIR: cannot create a temporary file in ", folder.string(),
              " to capture a command's output: ", std::strerror(errno));
    ::close(fd);
    path_ = name;
  }
  ~CaptureFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  CaptureFile(const CaptureFile&) = delete;
  CaptureFile& operator=(const CaptureFile&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string read() const { return try_read_file(path_).value_or(""); }

 private:
  std::filesystem::path path_;
};

std::string without_trailing_newlines(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

std::string join_command(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += a.find(' ') == std::string::npos ? a : "'" + a + "'";
  }
  return out;
}

std::string format_seconds(double seconds) {
  std::ostringstream text;
  text << seconds << " s";
  return text.str();
}

WaitResult wait_with_timeout(Process& process, double timeout_s, std::chrono::milliseconds grace) {
  if (timeout_s <= 0) return {process.wait(), false};
  // Short sleeps first: most helper commands end within milliseconds.
  auto pause = std::chrono::milliseconds(1);
  while (!process.poll()) {
    if (process.elapsed_s() > timeout_s) return {process.terminate(grace), true};
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
  return {*process.poll(), false};
}

CommandResult run_command(const CommandSpec& spec) {
  GPT_CHECK(!spec.argv.empty(), "run_command: empty command line");
  GPT_CHECK(spec.timeout_s > 0, "run_command: '", join_command(spec.argv), "' has no time limit");
  const bool capture = spec.log_path.empty();
  std::optional<CaptureFile> out, err;
  if (capture) {
    out.emplace();
    err.emplace();
  }
  LaunchSpec launch{spec.argv, capture ? out->path() : spec.log_path, {}, {}, spec.truncate_log || capture};
  launch.working_dir = spec.working_dir;
  if (capture) launch.stderr_path = err->path();
  Process process = Process::start(launch);
  const WaitResult waited = wait_with_timeout(process, spec.timeout_s);
  if (waited.timed_out) {
    throw CommandTimedOut("'" + join_command(spec.argv) + "' did not finish within " + format_seconds(spec.timeout_s) +
                          (spec.timeout_source.empty() ? "" : " (" + spec.timeout_source + ")") +
                          ": its process group was killed" +
                          (capture ? "" : "; its output is in " + spec.log_path.string()));
  }
  CommandResult result;
  result.exit = waited.exit;
  if (capture) {
    result.out = out->read();
    result.err = err->read();
  }
  return result;
}

std::string capture_stdout(const std::vector<std::string>& argv, double timeout_s,
                           const std::filesystem::path& working_dir) {
  CommandSpec spec;
  spec.argv = argv;
  spec.timeout_s = timeout_s;
  spec.working_dir = working_dir;
  const CommandResult r = run_command(spec);
  const std::string first_error_line = r.err.substr(0, r.err.find('\n'));
  GPT_CHECK(r.succeeded(), "'", join_command(argv), "' ended with ", r.exit.describe(),
            first_error_line.empty() ? "" : ": " + first_error_line);
  return without_trailing_newlines(r.out);
}

}  // namespace gpt::harness
