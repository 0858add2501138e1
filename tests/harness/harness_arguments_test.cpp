// The first `--` ends the harness's options: what follows is the command of record/compare, whatever option
// precedes the `--` and whatever flags the command has (harness_arguments, harness/commands/common.h).
#include <CLI/CLI.hpp>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "harness/commands/common.h"

namespace gpt::harness {
namespace {

struct Parsed {
  std::vector<std::string> cli11_words;  // what CLI11 is given, program name included
  std::optional<std::vector<std::string>> command;
};

Parsed split(const std::vector<std::string>& words) {
  CLI::App app;
  std::vector<std::string> command;
  app.add_subcommand("compare")->add_option("command", command);
  app.add_subcommand("query");
  GlobalOptions options;
  std::vector<const char*> argv;
  for (const auto& w : words) argv.push_back(w.c_str());
  Parsed p;
  for (const char* w : harness_arguments(app, options, static_cast<int>(argv.size()), argv.data())) {
    p.cli11_words.emplace_back(w);
  }
  p.command = options.command_after_dashes;
  return p;
}

TEST(HarnessArguments, TheFirstDashesEndTheOptionsOfACommandThatTakesOne) {
  const Parsed p = split({"harness", "--db", "x.db", "compare", "--fail-if-slower", "5", "--", "./trainer", "--name",
                          "other", "--", "--timeout", "1"});
  EXPECT_EQ(p.cli11_words, (std::vector<std::string>{"harness", "--db", "x.db", "compare", "--fail-if-slower", "5"}));
  ASSERT_TRUE(p.command);
  EXPECT_EQ(*p.command, (std::vector<std::string>{"./trainer", "--name", "other", "--", "--timeout", "1"}));
}

TEST(HarnessArguments, EmptyCommandAfterDashesIsKeptAsGiven) {
  const Parsed p = split({"harness", "compare", "--"});
  EXPECT_EQ(p.cli11_words, (std::vector<std::string>{"harness", "compare"}));
  ASSERT_TRUE(p.command);
  EXPECT_TRUE(p.command->empty());
}

// A subcommand without a command, or no `--` at all: CLI11 gets every word (and refuses stray ones as before).
TEST(HarnessArguments, OtherLinesReachCli11Whole) {
  const std::vector<std::string> query = {"harness", "query", "sweeps", "--", "x"};
  EXPECT_EQ(split(query).cli11_words, query);
  EXPECT_FALSE(split(query).command);
  const std::vector<std::string> plain = {"harness", "compare", "--runs", "2"};
  EXPECT_EQ(split(plain).cli11_words, plain);
  EXPECT_FALSE(split(plain).command);
}

}  // namespace
}  // namespace gpt::harness
