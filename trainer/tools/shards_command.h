#pragma once
// `tokenize shards`: text files or JSONL documents -> train/validation token shards plus a JSON report.
// `tokenize synthetic`: the synthetic corpus of the `tiny` recipe (RECIPE §R.1).
#include <CLI/CLI.hpp>

namespace gpt {

void register_shards_command(CLI::App& app);
void register_synthetic_command(CLI::App& app);

}  // namespace gpt
