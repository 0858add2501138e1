#include "trainer/tokenizer/gpt2_tokenizer.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/check.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace gpt {
namespace {

using testing::gpt2_tokenizer;
using testing::utf8;

std::vector<int32_t> encode(std::string_view text) { return gpt2_tokenizer().encode_ordinary(text); }

TEST(Gpt2Tokenizer, DefaultRanksFileIsInstalled) {
  // Fails with "... run scripts/fetch-tokenizer ..." when the ranks file is missing.
  const std::filesystem::path path = Gpt2Tokenizer::default_ranks_path();
  EXPECT_TRUE(std::filesystem::is_regular_file(path)) << path;
  EXPECT_EQ(gpt2_tokenizer().vocab_size(), 50257);
}

TEST(Gpt2Tokenizer, MatchesTiktokenVectors) {
  std::ifstream in(std::string(SPEEDRUN_FIXTURES_DIR) + "/gpt2_tokenizer_vectors.json");
  ASSERT_TRUE(in.good()) << "tests/fixtures/gpt2_tokenizer_vectors.json missing";
  const nlohmann::json vectors = nlohmann::json::parse(in);
  const auto& cases = vectors.at("cases");
  ASSERT_GE(cases.size(), 20u);
  for (const auto& test_case : cases) {
    const std::string text = test_case.at("text").get<std::string>();
    const std::vector<int32_t> expected = test_case.at("tokens").get<std::vector<int32_t>>();
    EXPECT_EQ(encode(text), expected) << "text: " << ::testing::PrintToString(text);
    EXPECT_EQ(gpt2_tokenizer().decode(expected), text);
  }
}

TEST(Gpt2Tokenizer, EndOfTextLiteralIsOrdinaryText) {
  EXPECT_EQ(encode("<|endoftext|>"), (std::vector<int32_t>{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(gpt2_tokenizer().token_bytes(Gpt2Tokenizer::kEndOfText), "<|endoftext|>");
  const std::vector<int32_t> ids{15496, Gpt2Tokenizer::kEndOfText, 995};
  EXPECT_EQ(gpt2_tokenizer().decode(ids), "Hello<|endoftext|> world");
}

TEST(Gpt2Tokenizer, KnownTokens) {
  const Gpt2Tokenizer& tok = gpt2_tokenizer();
  EXPECT_EQ(tok.token_bytes(262), " the");
  EXPECT_EQ(tok.token_bytes(198), "\n");
  EXPECT_EQ(tok.token_bytes(0), "!");
  EXPECT_EQ(tok.find_token(" the"), 262);
  for (int byte = 0; byte < 256; ++byte) {  // every byte is a token
    const std::string bytes(1, static_cast<char>(byte));
    ASSERT_TRUE(tok.find_token(bytes).has_value()) << byte;
    EXPECT_EQ(tok.token_bytes(*tok.find_token(bytes)), bytes);
  }
  EXPECT_FALSE(tok.find_token("<|endoftext|>").has_value());
  EXPECT_FALSE(tok.find_token("").has_value());
}

TEST(Gpt2Tokenizer, AppendKeepsExistingIds) {
  std::vector<int32_t> ids{Gpt2Tokenizer::kEndOfText};
  gpt2_tokenizer().encode_ordinary_append("Hello world", ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{50256, 15496, 995}));
}

TEST(Gpt2Tokenizer, DecodeRejectsIdsOutOfRange) {
  const Gpt2Tokenizer& tok = gpt2_tokenizer();
  for (const int32_t bad : {-1, 50257, 50304}) {
    const std::vector<int32_t> ids{11, bad};
    try {
      (void)tok.decode(ids);
      ADD_FAILURE() << "no error for id " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("position 1"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)tok.token_bytes(50257), Error);
}

// Random valid UTF-8 mixing the character families the pre-tokenizer distinguishes.
std::string random_utf8(std::mt19937& rng, size_t max_chars) {
  const auto pick = [&](char32_t first, char32_t last) {
    return first + static_cast<char32_t>(rng() % (last - first + 1));
  };
  std::string text;
  const size_t chars = rng() % (max_chars + 1);
  for (size_t i = 0; i < chars; ++i) {
    char32_t cp = 0;
    switch (rng() % 12) {
      case 0:
        cp = pick(U'a', U'z');
        break;
      case 1:
        cp = pick(U'A', U'Z');
        break;
      case 2:
        cp = pick(U'0', U'9');
        break;
      case 3:
        cp = U" \t\n\r\v\f"[rng() % 6];
        break;
      case 4:
        cp = std::array<char32_t, 6>{0x85, 0xA0, 0x2028, 0x3000, 0x200B, 0xFEFF}[rng() % 6];
        break;
      case 5:
        cp = U"'.,!?-\"()srtvmld"[rng() % 16];
        break;
      case 6:
        cp = pick(0x300, 0x36F);
        break;  // combining marks
      case 7:
        cp = pick(0x4E00, 0x9FFF);
        break;  // CJK
      case 8:
        cp = pick(0x1F300, 0x1FAFF);
        break;  // emoji (astral)
      case 9:
        cp = pick(0x20000, 0x2A6DF);
        break;  // CJK extension B (astral)
      case 10:
        cp = pick(0x80, 0x7FF);
        break;  // Latin, Greek, Cyrillic, Hebrew, Arabic...
      default:
        cp = pick(0x10000, 0x10FFFF);
        break;  // any astral code point, assigned or not
    }
    text += utf8(cp);
  }
  return text;
}

TEST(Gpt2Tokenizer, RoundTripsRandomValidUtf8) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::string text = random_utf8(rng, 120);
    const std::vector<int32_t> ids = encode(text);
    ASSERT_EQ(gpt2_tokenizer().decode(ids), text) << ::testing::PrintToString(text);
    for (const int32_t id : ids) ASSERT_LT(id, Gpt2Tokenizer::kEndOfText);
  }
}

TEST(Gpt2Tokenizer, RoundTripsRandomInvalidBytes) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 3000; ++trial) {
    std::string text(rng() % 200, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    ASSERT_EQ(gpt2_tokenizer().decode(encode(text)), text) << ::testing::PrintToString(text);
  }
}

TEST(Gpt2Tokenizer, InvalidBytesAreEncodedAsTheirByteTokens) {
  // 0xFF alone is not a merge of anything: it maps to its single-byte token.
  const std::vector<int32_t> ids = encode("\xFF");
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(gpt2_tokenizer().token_bytes(ids[0]), "\xFF");
  // A lone continuation byte next to text does not change how the text around it is split.
  const std::vector<int32_t> hello = encode("Hello");
  const std::vector<int32_t> world = encode(" world");
  std::vector<int32_t> expected = hello;
  const std::vector<int32_t> bad = encode("\x80");
  expected.insert(expected.end(), bad.begin(), bad.end());
  expected.insert(expected.end(), world.begin(), world.end());
  EXPECT_EQ(encode("Hello\x80 world"), expected);
}

TEST(Gpt2Tokenizer, LongPiecesUseTheSameMerges) {
  // A 100 kB word and a 100 kB whitespace run: one piece each, merged without quadratic cost.
  const std::string word(100000, 'a');
  const std::vector<int32_t> ids = encode(word);
  EXPECT_EQ(gpt2_tokenizer().decode(ids), word);
  const std::string spaces = "x" + std::string(100000, ' ') + "y";
  EXPECT_EQ(gpt2_tokenizer().decode(encode(spaces)), spaces);
}

// Shard fixture: 256 int32 header, then uint16 tokens; one document starting with <|endoftext|>.
std::vector<int32_t> read_shard(const std::string& name) {
  std::ifstream in(std::string(SPEEDRUN_FIXTURES_DIR) + "/" + name, std::ios::binary);
  GPT_CHECK(in.good(), "fixture ", name, " missing");
  std::vector<int32_t> header(256);
  in.read(reinterpret_cast<char*>(header.data()), 256 * sizeof(int32_t));
  GPT_CHECK(header[0] == 20240520 && header[1] == 1, "fixture ", name, " has a bad header");
  std::vector<uint16_t> tokens(static_cast<size_t>(header[2]));
  in.read(reinterpret_cast<char*>(tokens.data()), static_cast<std::streamsize>(tokens.size() * 2));
  GPT_CHECK(in.good(), "fixture ", name, " truncated");
  return std::vector<int32_t>(tokens.begin(), tokens.end());
}

bool is_space_byte(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

TEST(Gpt2Tokenizer, ReencodesTheAustenShardsExactly) {
  // The shards were encoded with tiktoken; decoding and re-encoding must give the same ids. The shard
  // ends mid-document, so compare up to the last token that starts a new piece after a non-space one.
  const Gpt2Tokenizer& tok = gpt2_tokenizer();
  for (const std::string name : {"austen_train_000000.bin", "austen_val_000000.bin"}) {
    const std::vector<int32_t> shard = read_shard(name);
    ASSERT_EQ(shard.front(), Gpt2Tokenizer::kEndOfText);
    size_t cut = shard.size() - 1;
    while (cut > 2 && !(is_space_byte(tok.token_bytes(shard[cut]).front()) &&
                        !is_space_byte(tok.token_bytes(shard[cut - 1]).back()))) {
      --cut;
    }
    ASSERT_GT(cut, shard.size() - 100) << name;
    const std::vector<int32_t> document(shard.begin() + 1, shard.begin() + static_cast<std::ptrdiff_t>(cut));
    const std::vector<int32_t> reencoded = tok.encode_ordinary(tok.decode(document));
    ASSERT_EQ(reencoded.size(), document.size()) << name;
    for (size_t i = 0; i < document.size(); ++i) {
      ASSERT_EQ(reencoded[i], document[i]) << name << " token " << i;
    }
  }
}

}  // namespace
}  // namespace gpt
