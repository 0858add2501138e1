#include "trainer/data/corpus_fingerprint.h"

#include "base/check.h"

namespace gpt {

void CorpusFingerprint::add_shard(const std::filesystem::path& path, std::int64_t token_count) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  // One record per shard; the separators (0x1f, 0x1e) cannot occur in the decimal numbers around them.
  const std::string record = path.filename().string() + '\x1f' + std::to_string(ec ? 0 : bytes) + '\x1f' +
                             std::to_string(token_count) + '\x1e';
  digest = fnv1a64(record, digest);
  ++shards;
  tokens += token_count;
}

std::string CorpusFingerprint::describe() const {
  return "'" + dir + "' (" + std::to_string(shards) + " shards, " + std::to_string(tokens) + " tokens, fingerprint " +
         hex64(digest) + ")";
}

nlohmann::json CorpusFingerprint::to_json() const {
  return {{"dir", dir}, {"shards", shards}, {"tokens", tokens}, {"fingerprint", hex64(digest)}};
}

CorpusFingerprint CorpusFingerprint::from_json(const nlohmann::json& j, const std::string& source) {
  CorpusFingerprint f;
  try {
    f.dir = j.at("dir").get<std::string>();
    f.shards = j.at("shards").get<std::int64_t>();
    f.tokens = j.at("tokens").get<std::int64_t>();
    const std::string text = j.at("fingerprint").get<std::string>();
    std::size_t used = 0;
    f.digest = std::stoull(text, &used, 16);
    GPT_CHECK(used == text.size() && text.size() == 16, "checkpoint '", source, "': data fingerprint '", text,
              "' is not 16 hex digits");
  } catch (const nlohmann::json::exception& e) {
    GPT_FAIL("checkpoint '", source, "': its data record is incomplete or mistyped: ", e.what());
  } catch (const std::logic_error&) {  // std::stoull: not hex, out of range
    GPT_FAIL("checkpoint '", source, "': its data fingerprint is not 16 hex digits");
  }
  return f;
}

}  // namespace gpt
