#pragma once
// Errors as the user reads them: GPT_CHECK (base/check.h) appends the raising source line (" [path/file.cpp:54]")
// to each message, which helps a developer and distracts a user, so programs drop it unless asked to debug.
#include <string>

namespace gpt {

// `what` without the source locations GPT_CHECK appends, which only `--log-level debug` (or trace) keeps: pass
// keep_source_locations = gpt::log::enabled(debug). Brackets that are no source location stay.
std::string user_error_message(const std::string& what, bool keep_source_locations);
std::string user_error_message(const std::string& what, const char*) = delete;  // a level name is no flag

}  // namespace gpt
