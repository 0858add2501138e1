#pragma once
// UTC time stamps, formatted once for every layer: ISO 8601 for stored and reported dates, a compact form for names.
#include <ctime>
#include <string>

namespace gpt {

// `when` as UTC in strftime `format` (at most 63 characters of output).
std::string format_utc(std::time_t when, const char* format);
// 2026-12-06T11:52:27Z
std::string utc_iso8601(std::time_t when);
// 20261206-115227 (sorts like the time; a plain path component, for default sweep names)
std::string utc_compact(std::time_t when);
// The current time in those forms.
std::string utc_iso8601_now();
std::string utc_compact_now();

}  // namespace gpt
