#pragma once
// The head every HTML page of the harness shares (reports and the site): one inline style sheet, no scripts.
#include <string>

namespace gpt::harness::html {

// "<!DOCTYPE html>...<body>" with `title` (escaped) and the shared style.
std::string page_head(const std::string& title);

}  // namespace gpt::harness::html
