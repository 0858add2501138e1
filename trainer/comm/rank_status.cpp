#include "trainer/comm/rank_status.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "trainer/comm/launch_env.h"

namespace gpt {

namespace {

// The folder and this rank's number, when this process is a rank of a launch that asked for statuses.
std::optional<std::pair<std::filesystem::path, int>> status_place() {
  const char* dir = std::getenv(kRankStatusDirVar);
  if (dir == nullptr || *dir == '\0') return std::nullopt;
  try {
    return std::make_pair(std::filesystem::path(dir), detect_launch_env().rank);
  } catch (const std::exception&) {
    return std::nullopt;  // a malformed launch environment is reported by the run itself
  }
}

std::filesystem::path status_file(const std::filesystem::path& dir, int rank, const char* suffix) {
  return dir / ("rank" + std::to_string(rank) + suffix);
}

// Written beside and renamed, so the launcher never reads half a file.
void write_status(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::trunc);
    out << text << "\n";
    if (!out.good()) return;
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
}

std::optional<std::string> read_status(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in.good()) return std::nullopt;
  std::string line;
  std::getline(in, line);
  return line;
}

// The signal note: an fd opened beforehand (a handler may only write), and the handlers it chains to.
int g_signal_note_fd = -1;
struct sigaction g_previous_int;  // globals: zero-initialised
struct sigaction g_previous_term;

extern "C" void note_signal(int sig) {
  const char* text = sig == SIGINT ? "SIGINT\n" : "SIGTERM\n";
  if (g_signal_note_fd >= 0) (void)!::write(g_signal_note_fd, text, std::strlen(text));
  const struct sigaction& previous = sig == SIGINT ? g_previous_int : g_previous_term;
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
    previous.sa_handler(sig);
  } else if (previous.sa_handler == SIG_DFL) {
    ::signal(sig, SIG_DFL);
    ::raise(sig);
  }
}

}  // namespace

void record_rank_start() {
  const auto place = status_place();
  if (!place) return;
  write_status(status_file(place->first, place->second, ".pid"), std::to_string(::getpid()));
  if (g_signal_note_fd >= 0) return;  // once per process
  g_signal_note_fd = ::open(status_file(place->first, place->second, ".sig").c_str(),
                            O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
  struct sigaction action {};
  action.sa_handler = note_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, &g_previous_int);
  sigaction(SIGTERM, &action, &g_previous_term);
}

void record_rank_end(int exit_code, const std::string& reason) {
  if (const auto place = status_place()) {
    write_status(status_file(place->first, place->second, ".end"),
                 std::to_string(exit_code) + " " + reason.substr(0, reason.find('\n')));
  }
}

std::vector<RankEnd> read_rank_ends(const std::filesystem::path& dir, int ranks) {
  std::vector<RankEnd> ends;
  for (int r = 0; r < ranks; ++r) {
    RankEnd& end = ends.emplace_back();
    end.rank = r;
    if (const auto pid = read_status(status_file(dir, r, ".pid"))) {
      char* stop = nullptr;
      const long value = std::strtol(pid->c_str(), &stop, 10);
      if (stop != pid->c_str() && value > 0) end.pid = static_cast<pid_t>(value);
    }
    if (std::ifstream in(status_file(dir, r, ".sig")); in.good()) {
      for (std::string name; std::getline(in, name);) end.signals += (end.signals.empty() ? "" : ", ") + name;
    }
    if (const auto line = read_status(status_file(dir, r, ".end"))) {
      char* stop = nullptr;
      const long code = std::strtol(line->c_str(), &stop, 10);
      if (stop != line->c_str()) {
        end.exit_code = static_cast<int>(code);
        const std::string rest(stop);
        const size_t first = rest.find_first_not_of(' ');
        end.reason = first == std::string::npos ? std::string() : rest.substr(first);
      }
    }
  }
  return ends;
}

std::vector<pid_t> recorded_rank_pids(const std::filesystem::path& dir, int ranks) {
  std::vector<pid_t> pids;
  for (const RankEnd& end : read_rank_ends(dir, ranks)) {
    if (end.pid) pids.push_back(*end.pid);
  }
  return pids;
}

std::string describe_rank_ends(const std::vector<RankEnd>& ends, int mpirun_code) {
  std::ostringstream o;
  for (const RankEnd& end : ends) {
    if (end.exit_code == 0) continue;
    if (o.tellp() > 0) o << "; ";
    o << "rank " << end.rank;
    if (end.exit_code) {
      o << " exited with code " << *end.exit_code;
      if (!end.reason.empty()) o << " (" << end.reason << ")";
    } else if (!end.pid) {
      o << " left no status (it never started, or was killed before it could record itself)";
    } else if (!end.signals.empty()) {
      o << " received " << end.signals << " (mpirun stopping the job, or a launcher) and ended without a status";
    } else {
      o << " ended without a status: ";
      if (mpirun_code > 128) {
        o << "killed by " << signal_name(mpirun_code - 128) << " (mpirun's exit status " << mpirun_code
          << ") or crashed";
      } else {
        o << "killed (e.g. SIGKILL, the OOM killer) or crashed";
      }
    }
  }
  return o.str();
}

}  // namespace gpt
