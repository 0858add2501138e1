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

// The JSON library's error ids were shown to users ("bad.json: not valid Google Benchmark JSON: [json.exception.
// parse_error.101] parse error at line 2, ..."); the line and column are what they need.
TEST(UserErrorMessage, DropsTheJsonLibrarysErrorIds) {
  const std::string raised =
      "bad.json: not valid Google Benchmark JSON: [json.exception.parse_error.101] parse error at line 2, column 1: "
      "syntax error";
  const std::string shown = "bad.json: not valid Google Benchmark JSON: parse error at line 2, column 1: syntax error";
  EXPECT_EQ(user_error_message(raised, false), shown);
  EXPECT_EQ(user_error_message(raised, true), shown);
  EXPECT_EQ(user_error_message("a [json.exception.out_of_range.406] b; c [json.exception.type_error.302]", false),
            "a b; c ");
  EXPECT_EQ(user_error_message("an arm named [json.other] stays", false), "an arm named [json.other] stays");
}

// Names in error messages were echoed with their raw control bytes (an escape sequence acts on the terminal) and
// broken UTF-8.
TEST(UserErrorMessage, ControlBytesAndBrokenUtf8AreEscaped) {
  EXPECT_EQ(printable_text("sweep '\x1b[2Jx'"), "sweep '\\x1b[2Jx'");
  EXPECT_EQ(printable_text("a\rb\x7f"), "a\\x0db\\x7f");
  EXPECT_EQ(printable_text("run-\xff\xfe.txt"), "run-\\xff\\xfe.txt");
  EXPECT_EQ(printable_text("\xc3"), "\\xc3");                         // a sequence cut short
  EXPECT_EQ(printable_text("\xc0\xaf"), "\\xc0\\xaf");                // overlong
  EXPECT_EQ(printable_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");       // a surrogate
  EXPECT_EQ(printable_text("µs, ✓, 𝄞\n\tnext"), "µs, ✓, 𝄞\n\tnext");  // well-formed text and line breaks stay
  EXPECT_EQ(user_error_message("--sweep: no sweep '\x1b]0;x\x07' [harness/commands/query.cpp:12]", false),
            "--sweep: no sweep '\\x1b]0;x\\x07'");
}

}  // namespace
}  // namespace gpt
