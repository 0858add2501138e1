// Errors for the user name the file, field or flag, not the source line that raised them (kept at --log-level debug).
#include <gtest/gtest.h>

#include "base/check.h"
#include "base/user_error.h"

namespace gpt {
namespace {

TEST(UserErrorMessage, DropsSourceLocationsUnlessDebugging) {
  const std::string raised = "database 'x.db' fails its integrity check [/src/harness/store/sqlite.cpp:54]";
  EXPECT_EQ(user_error_message(raised, false), "database 'x.db' fails its integrity check");
  EXPECT_EQ(user_error_message(raised, true), raised);
  // Nested errors carry their own location inside the message.
  EXPECT_EQ(user_error_message("compare: building 'x' failed (git: exit 128 [harness/launcher/command.cpp:90]) "
                               "[harness/commands/compare_build.cpp:36]",
                               false),
            "compare: building 'x' failed (git: exit 128)");
  // Brackets that are not source locations stay.
  EXPECT_EQ(user_error_message("arm \"x [1705 steps]\" has [3] runs", false), "arm \"x [1705 steps]\" has [3] runs");
  try {
    GPT_FAIL("--runs: expected a count >= 2, got ", 1);
  } catch (const gpt::Error& e) {
    EXPECT_EQ(user_error_message(e.what(), false), "--runs: expected a count >= 2, got 1");
  }
}

}  // namespace
}  // namespace gpt
