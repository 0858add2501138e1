#include "trainer/tools/ids_command.h"

#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/check.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace gpt {
namespace {

struct IdsOptions {
  bool decode = false;
  std::string ranks_file;  // empty: Gpt2Tokenizer::default_ranks_path()
};

std::string read_all_stdin() {
  std::cin >> std::noskipws;
  std::string data{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  GPT_CHECK(!std::cin.bad(), "ids: error reading stdin");
  return data;
}

void write_stdout(std::string_view bytes) {
  GPT_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), stdout) == bytes.size() && std::fflush(stdout) == 0,
            "ids: error writing stdout");
}

std::vector<int32_t> parse_id_array(const std::string& text, int32_t vocab_size) {
  nlohmann::json parsed;
  try {
    parsed = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    GPT_FAIL("ids --decode: stdin is not JSON (expected an array of token ids): ", e.what());
  }
  GPT_CHECK(parsed.is_array(), "ids --decode: stdin must be a JSON array of token ids, got a ", parsed.type_name());
  std::vector<int32_t> ids;
  ids.reserve(parsed.size());
  for (size_t i = 0; i < parsed.size(); ++i) {
    const nlohmann::json& id = parsed[i];
    GPT_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab_size,
              "ids --decode: element ", i, " is ", id.dump(), ", expected an integer id in [0, ", vocab_size, ")");
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  return ids;
}

std::string format_id_array(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ids[i]);
  }
  out += "]\n";
  return out;
}

void run_ids(const IdsOptions& options) {
  const Gpt2Tokenizer tok =
      options.ranks_file.empty() ? Gpt2Tokenizer::load_default() : Gpt2Tokenizer::load(options.ranks_file);
  const std::string input = read_all_stdin();
  if (options.decode) {
    write_stdout(tok.decode(parse_id_array(input, tok.vocab_size())));
  } else {
    write_stdout(format_id_array(tok.encode_ordinary(input)));
  }
}

}  // namespace

void register_ids_command(CLI::App& app) {
  auto options = std::make_shared<IdsOptions>();
  CLI::App* ids = app.add_subcommand(
      "ids", "Encode stdin (UTF-8 text) to GPT-2 token ids printed as one JSON array (encode_ordinary)");
  ids->add_flag("--decode", options->decode, "Read a JSON array of ids from stdin and write their bytes");
  ids->add_option("--ranks", options->ranks_file,
                  "r50k_base.tiktoken to use (default: $SPEEDRUN_TOKENIZER, else data/tokenizer/ in the source tree)");
  ids->callback([options] { run_ids(*options); });
}

}  // namespace gpt
