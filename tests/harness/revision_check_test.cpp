// Does each arm of a comparison run the code its name says? (harness/compare/revision_check.h)
#include <gtest/gtest.h>

#include "harness/compare/revision_check.h"

namespace gpt::harness::compare {
namespace {

const std::string kMain = "bffc9f5a0e1d2c3b4a5968778695a4b3c2d1e0f9";

TEST(RevisionCheck, SameCommitMatchesAShortOrFullName) {
  EXPECT_TRUE(same_commit("bffc9f5", kMain));
  EXPECT_TRUE(same_commit(kMain, kMain));
  EXPECT_FALSE(same_commit("bffc9f", kMain));  // fewer than 7 characters say nothing
  EXPECT_FALSE(same_commit("0000000", kMain));
  EXPECT_FALSE(same_commit("", kMain));
}

TEST(RevisionCheck, ABuiltRevisionMustBeTheCommitItsTrainerReports) {
  const RevisionCheck ok = check_arm_revision({"baseline", "main", kMain, "", {"bffc9f5"}});
  EXPECT_FALSE(ok.mismatch);
  EXPECT_FALSE(ok.label_only);
  EXPECT_EQ(ok.sentence, "baseline 'main' is commit bffc9f5a0e1d; every run's trainer reports it");
  const RevisionCheck bad = check_arm_revision({"candidate", "HEAD", kMain, "", {"1234567"}});
  EXPECT_TRUE(bad.mismatch);
  EXPECT_EQ(bad.sentence, "candidate 'HEAD' was built from commit bffc9f5a0e1d, but its trainer reports 1234567");
}

TEST(RevisionCheck, ABuildDirOfAnotherCommitMakesTheNameALabelOnly) {
  const RevisionCheck unknown = check_arm_revision({"candidate", "no-such-rev", "", "/b/cand", {"0000000"}});
  EXPECT_FALSE(unknown.mismatch);
  EXPECT_TRUE(unknown.label_only);
  EXPECT_EQ(unknown.sentence,
            "candidate 'no-such-rev' is a label only: the trainer in /b/cand reports 0000000, and "
            "'no-such-rev' names no commit here");
  const RevisionCheck other = check_arm_revision({"baseline", "main", kMain, "/b/base", {"0000000"}});
  EXPECT_TRUE(other.label_only);
  EXPECT_NE(other.sentence.find("'main' is commit bffc9f5a0e1d here"), std::string::npos) << other.sentence;
  // A build folder whose trainer reports the named commit is checked, not a label.
  const RevisionCheck same = check_arm_revision({"baseline", "main", kMain, "/b/base", {kMain}});
  EXPECT_FALSE(same.label_only);
  EXPECT_FALSE(same.mismatch);
}

}  // namespace
}  // namespace gpt::harness::compare
