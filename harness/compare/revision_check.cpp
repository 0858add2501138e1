#include "harness/compare/revision_check.h"

#include <algorithm>

namespace gpt::harness::compare {
namespace {

std::string short_commit(const std::string& commit) { return commit.substr(0, 12); }

std::string joined(const std::set<std::string>& commits) {
  std::string out;
  for (const auto& c : commits) out += (out.empty() ? "" : ", ") + short_commit(c);
  return out;
}

}  // namespace

bool same_commit(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  return n >= 7 && a.compare(0, n, b, 0, n) == 0;
}

RevisionCheck check_arm_revision(const ArmRevision& a) {
  RevisionCheck c;
  const std::string who = a.arm + " '" + a.named + "'";
  const bool all_match =
      !a.commit.empty() && !a.reported.empty() &&
      std::all_of(a.reported.begin(), a.reported.end(), [&](const std::string& r) { return same_commit(r, a.commit); });
  if (all_match) {
    c.sentence = who + " is commit " + short_commit(a.commit) + "; every run's trainer reports it";
    return c;
  }
  if (a.build_dir.empty()) {
    if (a.reported.empty()) {
      c.sentence = who + " was built from commit " + short_commit(a.commit) + "; its trainer reports no commit";
      return c;
    }
    c.mismatch = true;
    c.sentence =
        who + " was built from commit " + short_commit(a.commit) + ", but its trainer reports " + joined(a.reported);
    return c;
  }
  c.label_only = true;
  c.sentence = who + " is a label only: the trainer in " + a.build_dir + " " +
               (a.reported.empty() ? "reports no commit" : "reports " + joined(a.reported)) + ", and '" + a.named +
               "' " + (a.commit.empty() ? "names no commit here" : "is commit " + short_commit(a.commit) + " here");
  return c;
}

}  // namespace gpt::harness::compare
