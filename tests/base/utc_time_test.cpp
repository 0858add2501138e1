// base/utc_time.h: UTC formatting of known epoch values, independent of the local time zone.
#include "base/utc_time.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "base/check.h"

namespace gpt {
namespace {

TEST(UtcTime, EpochZero) {
  EXPECT_EQ(utc_iso8601(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(utc_compact(0), "19700101-000000");
}

TEST(UtcTime, KnownInstants) {
  EXPECT_EQ(utc_iso8601(1000000000), "2001-09-09T01:46:40Z");
  EXPECT_EQ(utc_compact(1000000000), "20010909-014640");
  EXPECT_EQ(utc_iso8601(1709210096), "2024-02-29T12:34:56Z");  // a leap day
  EXPECT_EQ(utc_compact(1709210096), "20240229-123456");
  EXPECT_EQ(utc_iso8601(4102444799), "2099-12-31T23:59:59Z");  // past 2038
}

TEST(UtcTime, IndependentOfTheLocalTimeZone) {
  const char* old = std::getenv("TZ");
  const std::string saved = old ? old : "";
  ::setenv("TZ", "America/New_York", 1);
  ::tzset();
  const std::string iso = utc_iso8601(1000000000);
  if (old)
    ::setenv("TZ", saved.c_str(), 1);
  else
    ::unsetenv("TZ");
  ::tzset();
  EXPECT_EQ(iso, "2001-09-09T01:46:40Z");
}

TEST(UtcTime, CustomFormat) {
  EXPECT_EQ(format_utc(1000000000, "%Y/%m/%d"), "2001/09/09");
  EXPECT_EQ(format_utc(1000000000, ""), "");
}

// `shape`: 9 for a digit, any other character for itself.
bool has_shape(const std::string& text, const std::string& shape) {
  if (text.size() != shape.size()) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (shape[i] == '9' ? !digit : text[i] != shape[i]) return false;
  }
  return true;
}

TEST(UtcTime, NowHasTheDocumentedShape) {
  const std::time_t before = std::time(nullptr);
  const std::string iso = utc_iso8601_now();
  const std::string compact = utc_compact_now();
  EXPECT_TRUE(has_shape(iso, "9999-99-99T99:99:99Z")) << iso;
  EXPECT_TRUE(has_shape(compact, "99999999-999999")) << compact;
  EXPECT_EQ(iso.substr(0, 4), utc_iso8601(before).substr(0, 4));  // this year (a new year's second aside)
}

}  // namespace
}  // namespace gpt
