#include "base/utc_time.h"

#include "base/check.h"

namespace gpt {

std::string format_utc(std::time_t when, const char* format) {
  std::tm tm{};
  GPT_CHECK(gmtime_r(&when, &tm) != nullptr, "cannot express time ", static_cast<long long>(when), " in UTC");
  char buf[64];
  const std::size_t written = std::strftime(buf, sizeof buf, format, &tm);
  GPT_CHECK(written > 0 || format[0] == '\0', "UTC time format '", format, "' gives no text or more than 63 chars");
  return std::string(buf, written);
}

std::string utc_iso8601(std::time_t when) { return format_utc(when, "%Y-%m-%dT%H:%M:%SZ"); }

std::string utc_compact(std::time_t when) { return format_utc(when, "%Y%m%d-%H%M%S"); }

std::string utc_iso8601_now() { return utc_iso8601(std::time(nullptr)); }

std::string utc_compact_now() { return utc_compact(std::time(nullptr)); }

}  // namespace gpt
