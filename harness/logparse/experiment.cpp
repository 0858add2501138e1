#include "harness/logparse/experiment.h"

#include <boost/uuid/detail/sha1.hpp>

#include <algorithm>
#include <cstdio>
#include <map>

#include "harness/logparse/logparse.h"

namespace gpt::harness {
namespace {

bool is_separator(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
  return line.size() >= 3 && line.find_first_not_of('=') == std::string_view::npos;
}

// The part of a key that tells the experiments of one folder apart, e.g. "1705 steps" or "code 1a2b3c4".
std::string distinguishing(const ExperimentKey& key, bool steps_differ, bool code_differs, bool recipe_differs) {
  std::vector<std::string> parts;
  if (steps_differ) parts.push_back(key.total_steps ? std::to_string(*key.total_steps) + " steps" : "no step count");
  if (code_differs) parts.push_back(key.code_hash.empty() ? "no code" : "code " + key.code_hash.substr(0, 7));
  if (recipe_differs) parts.push_back(key.recipe_hash.empty() ? "no recipe" : "recipe " + key.recipe_hash.substr(0, 8));
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : ", ") + p;
  return out;
}

}  // namespace

std::string sha1_hex(std::string_view bytes) {
  boost::uuids::detail::sha1 sha;
  sha.process_bytes(bytes.data(), bytes.size());
  unsigned int digest[5];
  sha.get_digest(digest);
  char hex[41];
  for (int i = 0; i < 5; ++i) std::snprintf(hex + 8 * i, 9, "%08x", digest[i]);
  return hex;
}

std::string log_code_hash(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = std::min(text.find('\n', begin), text.size());
    const std::string_view line = text.substr(begin, end - begin);
    if (parse_step_line(line)) return "";  // step lines before any separator: no code dump
    if (is_separator(line)) {
      const std::string_view code = text.substr(0, begin);
      return code.find_first_not_of(" \t\r\n") == std::string_view::npos ? "" : sha1_hex(code);
    }
    begin = end + 1;
  }
  return "";
}

ExperimentArms experiment_arms(const std::vector<ExperimentKey>& keys) {
  ExperimentArms out;
  out.arms.resize(keys.size());
  std::map<std::string, std::vector<size_t>> by_folder;
  for (size_t i = 0; i < keys.size(); ++i) by_folder[keys[i].folder_arm].push_back(i);
  for (const auto& [folder, members] : by_folder) {
    std::vector<ExperimentKey> distinct;
    for (size_t i : members) {
      if (std::find(distinct.begin(), distinct.end(), keys[i]) == distinct.end()) distinct.push_back(keys[i]);
    }
    if (distinct.size() == 1) {
      for (size_t i : members) out.arms[i] = folder;
      continue;
    }
    auto differs = [&](auto field) {
      return std::any_of(distinct.begin(), distinct.end(),
                         [&](const ExperimentKey& k) { return field(k) != field(distinct[0]); });
    };
    const bool steps = differs([](const ExperimentKey& k) { return k.total_steps; });
    const bool code = differs([](const ExperimentKey& k) { return k.code_hash; });
    const bool recipe = differs([](const ExperimentKey& k) { return k.recipe_hash; });
    std::map<std::string, size_t> runs_per_arm;
    for (size_t i : members) {
      out.arms[i] = folder + " [" + distinguishing(keys[i], steps, code, recipe) + "]";
      ++runs_per_arm[out.arms[i]];
    }
    std::string note = "import: '" + folder + "' mixes " + std::to_string(distinct.size()) +
                       " experiments (different " + std::string(steps ? "step counts" : (code ? "code" : "recipes")) +
                       "); split into arms";
    for (const auto& [arm, n] : runs_per_arm) note += " \"" + arm + "\" (" + std::to_string(n) + " run(s))";
    out.notes.push_back(note);
  }
  return out;
}

}  // namespace gpt::harness
