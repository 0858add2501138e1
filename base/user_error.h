#pragma once
// Errors as the user reads them: GPT_CHECK (base/check.h) appends the raising source line (" [path/file.cpp:54]")
// to each message, which helps a developer and distracts a user, so programs drop it unless asked to debug.
#include <string>
#include <string_view>

namespace gpt {

// `what` without the source locations GPT_CHECK appends, which only `--log-level debug` (or trace) keeps: pass
// keep_source_locations = gpt::log::enabled(debug). Brackets that are no source location stay. Control bytes
// (other than newline and tab) and bytes that are not well-formed UTF-8 become \xNN escapes (printable_text). The JSON
// library's error ids ("[json.exception.parse_error.101] ") go at every level: its line and column stay.
std::string user_error_message(const std::string& what, bool keep_source_locations);
// `text` with control bytes (other than newline and tab) and bytes that are not well-formed UTF-8 as \xNN: names in
// messages come from the command line, files and databases, and an escape sequence must not reach the terminal.
std::string printable_text(std::string_view text);
std::string user_error_message(const std::string& what, const char*) = delete;  // a level name is no flag

}  // namespace gpt
