#include "trainer/run/divergence_report.h"

#include <algorithm>
#include <cmath>

#include "kernels/tail_average.h"

namespace gpt {

namespace {

bool is_tested(const NamedTensor& t) {
  return t.tensor.defined() && is_floating(t.tensor.dtype()) && t.tensor.numel() > 0;
}

}  // namespace

StateScan scan_state(const std::vector<NamedTensor>& state) {
  StateScan scan;
  for (const NamedTensor& t : state) {
    if (!is_tested(t)) continue;
    scan.tested.push_back(t.name);
    if (!std::isfinite(sum_of_squares(t.tensor))) scan.nonfinite.push_back(t.name);
  }
  return scan;
}

std::vector<std::string> nonfinite_tensors(const std::vector<NamedTensor>& state) {
  return scan_state(state).nonfinite;
}

std::string describe_nonfinite_state(const std::vector<NamedTensor>& state, size_t max_names) {
  return describe_nonfinite_state(scan_state(state), max_names);
}

std::string describe_nonfinite_state(const StateScan& scan, size_t max_names) {
  // Groups by the name's first part ("param", "grad", "adam", ...), in order of first appearance.
  struct Group {
    std::string kind;
    size_t tested = 0;
    std::vector<std::string> bad;  // the names' rest
  };
  std::vector<Group> groups;
  size_t next_bad = 0;  // scan.nonfinite is a subsequence of scan.tested
  for (const std::string& name : scan.tested) {
    const size_t slash = name.find('/');
    const std::string kind = name.substr(0, slash);
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Group& g) { return g.kind == kind; });
    if (it == groups.end()) it = groups.insert(groups.end(), Group{.kind = kind, .tested = 0, .bad = {}});
    ++it->tested;
    if (next_bad < scan.nonfinite.size() && scan.nonfinite[next_bad] == name) {
      it->bad.push_back(slash == std::string::npos ? name : name.substr(slash + 1));
      ++next_bad;
    }
  }
  std::string finite;
  for (const Group& g : groups) {
    if (g.bad.empty()) finite += (finite.empty() ? "" : ", ") + g.kind + " " + std::to_string(g.tested);
  }
  if (scan.nonfinite.empty()) {
    return "every one of the " + std::to_string(scan.tested.size()) + " floating state tensors is finite (" + finite +
           "): the non-finite value arose in the computation";
  }
  std::string text = "non-finite state:";
  const char* separator = " ";
  for (const Group& g : groups) {
    if (g.bad.empty()) continue;
    text += separator + g.kind + " " + std::to_string(g.bad.size()) + " of " + std::to_string(g.tested) + " (";
    for (size_t i = 0; i < g.bad.size() && i < max_names; ++i) text += (i == 0 ? "" : ", ") + g.bad[i];
    if (g.bad.size() > max_names) text += " and " + std::to_string(g.bad.size() - max_names) + " more";
    text += ")";
    separator = "; ";
  }
  if (!finite.empty()) text += "; finite: " + finite;
  return text;
}

}  // namespace gpt
