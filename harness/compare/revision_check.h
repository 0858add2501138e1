#pragma once
// Does each arm of a comparison run the code its name says? The revision the user named is resolved to a commit
// and checked against the commit every run's trainer reports (its OUT/ID.json environment). A trainer the harness
// built from the revision must report that commit (a mismatch is an error); a trainer from --build-dir was built
// by someone else, so unless its commit is the named revision's, the name is stated to be a label only.
#include <set>
#include <string>

namespace gpt::harness::compare {

struct ArmRevision {
  std::string arm;                 // "baseline" | "candidate"
  std::string named;               // what the user gave (a revision, a named baseline, a label)
  std::string commit;              // the commit `named` resolves to here; "" when it names none
  std::string build_dir;           // non-empty: the trainer came from this folder, not from a build of `commit`
  std::set<std::string> reported;  // the commits the arm's runs' trainers reported (empty ones left out)
};

struct RevisionCheck {
  bool mismatch = false;  // a trainer built from `commit` reports another commit: the comparison is not what it says
  bool label_only = false;
  std::string sentence;  // for the console and the reports
};

// Whether two commit names are the same commit: one is a prefix (>= 7 characters) of the other.
bool same_commit(const std::string& a, const std::string& b);

RevisionCheck check_arm_revision(const ArmRevision& arm);

}  // namespace gpt::harness::compare
