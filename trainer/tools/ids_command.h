#pragma once
// `tokenize ids`: text -> GPT-2 token ids as a JSON array, and back with --decode.
#include <CLI/CLI.hpp>

namespace gpt {

// Adds the `ids` subcommand to app; it runs (and throws gpt::Error on bad input) while app parses.
void register_ids_command(CLI::App& app);

}  // namespace gpt
