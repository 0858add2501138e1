// tokenize: GPT-2 tokenizer tools. Each subcommand lives in trainer/tools/ and registers itself here.
#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>

#include "base/check.h"
#include "trainer/tools/ids_command.h"
#include "trainer/tools/shards_command.h"

int main(int argc, char** argv) {
  CLI::App app{"GPT-2 tokenizer tools"};
  app.require_subcommand(1);
  gpt::register_ids_command(app);
  gpt::register_shards_command(app);
  gpt::register_synthetic_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);
    return status == 0 ? 0 : 2;  // usage errors: 2, like every project program
  } catch (const gpt::Error& e) {
    std::cerr << "tokenize: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "tokenize: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
