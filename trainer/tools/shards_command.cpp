#include "trainer/tools/shards_command.h"

#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/file_read.h"
#include "trainer/data/corpus_builder.h"
#include "trainer/data/synthetic.h"
#include "trainer/tokenizer/gpt2_tokenizer.h"

namespace gpt {
namespace {

struct ShardsOptions {
  std::vector<std::string> inputs;
  std::string out_dir;
  std::string format = "auto";  // auto | text | jsonl
  std::string text_field = "text";
  std::string name_field = "name";
  std::string source_field = "source";
  std::int64_t shard_tokens = 100'000'000;
  std::int64_t shuffle_seed = -1;  // < 0: input order
  std::uint64_t val_modulus = 50;
  double val_fraction = -1.0;
  bool compress = false;
  std::string ranks_file;
  bool quiet = false;
};

bool is_jsonl(const ShardsOptions& options, const std::filesystem::path& path) {
  if (options.format == "jsonl") return true;
  if (options.format == "text") return false;
  const std::string ext = path.extension().string();
  return ext == ".jsonl" || ext == ".ndjson";
}

class DocumentSink {
 public:
  DocumentSink(const Gpt2Tokenizer& tok, CorpusBuilder& builder) : tok_(tok), builder_(builder) {}
  void add(const std::string& source, const std::string& name, std::string_view text) {
    if (text.empty()) {
      builder_.skip_document(source);
      return;
    }
    ids_.clear();
    tok_.encode_ordinary_append(text, ids_);
    builder_.add_document(source, name, ids_);
  }

 private:
  const Gpt2Tokenizer& tok_;
  CorpusBuilder& builder_;
  std::vector<std::int32_t> ids_;
};

// One JSON object per line: the text field is the document; name/source fields are optional.
void read_jsonl(const ShardsOptions& options, const std::filesystem::path& path, DocumentSink& sink) {
  std::ifstream in(path, std::ios::binary);
  GPT_CHECK(in.good(), "shards: cannot read input ", path.string());
  const std::string default_source = path.stem().string();
  std::string line;
  for (std::int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(line_no);
    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {  // parse_error, out_of_range (numbers beyond double)
      GPT_FAIL("shards: ", where, ": not a JSON object: ", e.what());
    }
    GPT_CHECK(doc.is_object(), "shards: ", where, ": expected a JSON object, got ", doc.type_name());
    GPT_CHECK(doc.contains(options.text_field) && doc[options.text_field].is_string(), "shards: ", where,
              ": missing string field \"", options.text_field, "\"");
    auto string_field = [&](const std::string& key, const std::string& fallback) {
      return doc.contains(key) && doc[key].is_string() ? doc[key].get<std::string>() : fallback;
    };
    sink.add(string_field(options.source_field, default_source), string_field(options.name_field, where),
             doc[options.text_field].get_ref<const std::string&>());
  }
  GPT_CHECK(!in.bad(), "shards: error reading ", path.string());
}

void run_shards(const ShardsOptions& options) {
  GPT_CHECK(options.format == "auto" || options.format == "text" || options.format == "jsonl",
            "shards: --format must be auto, text or jsonl, got ", options.format);
  const Gpt2Tokenizer tok =
      options.ranks_file.empty() ? Gpt2Tokenizer::load_default() : Gpt2Tokenizer::load(options.ranks_file);
  SplitRule split{.modulus = options.val_modulus, .val_fraction = options.val_fraction};
  CorpusBuilder builder(
      {.out_dir = options.out_dir,
       .shard_tokens = options.shard_tokens,
       .split = split,
       .compress = options.compress,
       .shuffle_seed = options.shuffle_seed >= 0
                           ? std::optional<std::uint64_t>(static_cast<std::uint64_t>(options.shuffle_seed))
                           : std::nullopt});
  // Every input must be a regular file, checked before anything is read or written: a folder would otherwise fail
  // deep in the stream library, and a FIFO could block.
  for (const auto& input : options.inputs) {
    std::error_code ec;
    const auto status = std::filesystem::status(input, ec);
    GPT_CHECK(!ec && std::filesystem::exists(status), "shards: input ", input, " does not exist");
    GPT_CHECK(!std::filesystem::is_directory(status), "shards: input ", input,
              " is a directory; give the files in it (e.g. ", input, "/*.txt or ", input, "/*.jsonl)");
    GPT_CHECK(std::filesystem::is_regular_file(status), "shards: input ", input, " is not a regular file");
  }
  DocumentSink sink(tok, builder);
  for (const auto& input : options.inputs) {
    const std::filesystem::path path(input);
    if (is_jsonl(options, path)) {
      read_jsonl(options, path, sink);
    } else {
      // A plain text file is one document named by its path as given.
      sink.add(path.stem().string(), input, read_file(path, "shards input"));
    }
  }
  const nlohmann::json report = builder.finish();
  if (!options.quiet) {
    std::cout << "shards: " << report["documents"] << " documents, " << report["tokens"] << " tokens (train "
              << report["train"]["tokens"] << " in " << report["train"]["shards"].size() << " shards, val "
              << report["val"]["tokens"] << " in " << report["val"]["shards"].size() << " shards) -> "
              << options.out_dir << "/report.json\n";
  }
}

struct SyntheticOptions {
  std::string out_dir;
  SyntheticCorpusOptions corpus;
};

}  // namespace

void register_shards_command(CLI::App& app) {
  auto options = std::make_shared<ShardsOptions>();
  CLI::App* cmd = app.add_subcommand(
      "shards", "Tokenize documents into train/val shards: each document = [50256] + encode_ordinary(text)");
  cmd->add_option("inputs", options->inputs,
                  "Input files: *.jsonl (one JSON object per line; field --field is a document) or text files "
                  "(each file one document)")
      ->required();
  cmd->add_option("--out", options->out_dir, "Output directory for train_%06d.bin, val_%06d.bin, report.json")
      ->required();
  cmd->add_option("--format", options->format, "auto (by extension: .jsonl/.ndjson), text or jsonl");
  cmd->add_option("--field", options->text_field, "JSONL field holding the document text")->capture_default_str();
  cmd->add_option("--name-field", options->name_field,
                  "JSONL field naming the document for the split hash (default FILE:LINE when absent)")
      ->capture_default_str();
  cmd->add_option("--source-field", options->source_field,
                  "JSONL field grouping documents in the report (default: the file's stem)")
      ->capture_default_str();
  cmd->add_option("--shard-tokens", options->shard_tokens, "Tokens per shard (the last may be shorter)")
      ->capture_default_str();
  cmd->add_option("--val-modulus", options->val_modulus, "Validation when sha1(name) mod this == 0")
      ->capture_default_str();
  cmd->add_option("--val-fraction", options->val_fraction,
                  "Instead of the modulus: validation when sha1(name) mod 1e6 < fraction * 1e6")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--zstd", options->compress, "Write zstd-compressed .bin.zst shards");
  cmd->add_option("--shuffle-seed", options->shuffle_seed,
                  "Write the training documents in an order drawn from this seed (>= 0) instead of input order")
      ->check(CLI::Range(std::int64_t{0}, std::numeric_limits<std::int64_t>::max()));  // DBL_MAX prints 310 digits
  cmd->add_option("--ranks", options->ranks_file, "r50k_base.tiktoken to use (default: as `tokenize ids`)");
  cmd->add_flag("--quiet", options->quiet, "No summary line");
  cmd->callback([options] { run_shards(*options); });
}

void register_synthetic_command(CLI::App& app) {
  auto options = std::make_shared<SyntheticOptions>();
  CLI::App* cmd = app.add_subcommand(
      "synthetic", "Write the synthetic corpus of the tiny recipe (RECIPE R.1): train_000000.bin, val_000000.bin");
  cmd->add_option("--out", options->out_dir, "Output directory")->required();
  cmd->add_option("--seed", options->corpus.seed, "xorshift64* seed")->capture_default_str();
  cmd->add_option("--train-tokens", options->corpus.train_tokens, "Train tokens")->capture_default_str();
  cmd->add_option("--val-tokens", options->corpus.val_tokens, "Validation tokens")->capture_default_str();
  cmd->callback([options] {
    const auto paths = write_synthetic_corpus(options->out_dir, options->corpus);
    std::cout << "synthetic: wrote " << paths[0].string() << " (" << options->corpus.train_tokens << " tokens) and "
              << paths[1].string() << " (" << options->corpus.val_tokens << " tokens)\n";
  });
}

}  // namespace gpt
