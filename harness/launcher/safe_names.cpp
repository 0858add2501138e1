#include "harness/launcher/safe_names.h"

#include <algorithm>

#include "base/check.h"

namespace gpt::harness {

namespace {

constexpr std::size_t kMaxNameLength = 128;

bool is_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

bool name_char(char c) { return is_alnum(c) || std::string_view("._-+=@,").find(c) != std::string_view::npos; }

// Printable for an error message: control characters shown as `\xNN`, long values cut.
std::string shown(std::string_view text) {
  std::string out;
  for (const char c : text.substr(0, 80)) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      static const char* const kHex = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  if (text.size() > 80) out += "...";
  return out;
}

}  // namespace

std::optional<std::string> path_name_problem(std::string_view name) {
  if (name.empty()) return "expected a non-empty name";
  if (name.size() > kMaxNameLength) return "expected at most 128 characters, got " + std::to_string(name.size());
  if (name.front() == '.' || name.front() == '-') return "expected a name that does not start with '.' or '-'";
  const auto bad = std::find_if_not(name.begin(), name.end(), name_char);
  if (bad != name.end()) {
    return "expected letters, digits and . _ - + = @ , only (it becomes a folder name), found " +
           shown(std::string_view(&*bad, 1)) + (*bad == '/' ? " (no paths)" : "");
  }
  return std::nullopt;
}

void check_path_name(std::string_view flag, std::string_view name) {
  if (auto problem = path_name_problem(name)) GPT_FAIL(flag, " '", shown(name), "': ", *problem);
}

std::string to_path_name(std::string_view text) {
  std::string out(text.substr(0, kMaxNameLength));
  for (char& c : out) {
    if (!name_char(c)) c = '_';
  }
  if (out.empty()) return "_";
  if (out.front() == '.' || out.front() == '-') out.front() = '_';
  return out;
}

std::optional<std::string> slurm_name_problem(std::string_view value) {
  const bool ok = std::all_of(value.begin(), value.end(),
                              [](char c) { return is_alnum(c) || c == '_' || c == '-' || c == '.' || c == ','; });
  if (ok && value.size() <= kMaxNameLength) return std::nullopt;
  return "expected a Slurm name (letters, digits and _ - . , only, at most 128 characters)";
}

void check_slurm_name(std::string_view flag, std::string_view value) {
  if (auto problem = slurm_name_problem(value)) GPT_FAIL(flag, " '", shown(value), "': ", *problem);
}

}  // namespace gpt::harness
