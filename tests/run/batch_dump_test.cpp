// debug.dump_batches (trainer/export/batch_dump.h): one index line per timed step, none for the warmup, each with the
// step's microbatches as the loader made them and its training loss; the validation windows once; bad values named.
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_test_util.h"
#include "trainer/data/val_loader.h"

namespace gpt {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

template <typename T>
std::vector<T> read_file(const fs::path& dir, const json& entry) {
  const fs::path path = dir / entry.at("file").get<std::string>();
  std::vector<T> out(static_cast<size_t>(fs::file_size(path)) / sizeof(T));
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * sizeof(T)));
  return out;
}

TEST(BatchDump, EveryTimedStepIsWrittenOnceWithTheLoadersMicrobatchesAndItsLoss) {
  test::RunScratch scratch;
  RunOptions o = test::short_run(scratch, "dumped");  // warmup on: its steps must not be written
  const fs::path dir = scratch.root() / "batches";
  o.dump_batches = dir;
  TrainingRun run = test::standin_run(o);
  const RunResult r = run.run();
  ASSERT_EQ(r.status, RunStatus::finished) << r.error;

  std::ifstream index(dir / "steps.jsonl");
  std::vector<json> lines;
  for (std::string line; std::getline(index, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(static_cast<int64_t>(lines.size()), r.total_steps);
  ASSERT_EQ(r.train_losses.size(), lines.size());
  TrainLoader loader = run.make_train_loader({});
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& step = lines[i];
    EXPECT_EQ(step.at("step"), static_cast<int64_t>(i));
    EXPECT_DOUBLE_EQ(step.at("train_loss").get<double>(), r.train_losses[i]);
    const std::vector<Microbatch> expected = loader.next(
        CallShape{.slice_tokens = run.schedule().at(static_cast<int64_t>(i)).slice_tokens,
                  .max_doc_tokens = run.schedule().at(static_cast<int64_t>(i)).lmax,
                  .cu_seqlens_rows = static_cast<int32_t>(run.schedule().at(static_cast<int64_t>(i)).cu_rows)});
    ASSERT_EQ(step.at("microbatches").size(), expected.size());
    for (size_t m = 0; m < expected.size(); ++m) {
      const json& b = step["microbatches"][m];
      EXPECT_EQ(read_file<int32_t>(dir, b.at("inputs")), expected[m].inputs) << "step " << i << " mb " << m;
      EXPECT_EQ(read_file<int64_t>(dir, b.at("targets")), expected[m].targets);
      EXPECT_EQ(read_file<int32_t>(dir, b.at("cu_seqlens")), expected[m].cu_seqlens);
      EXPECT_EQ(read_file<int32_t>(dir, b.at("bigram_ids")), expected[m].bigram_ids);
      EXPECT_EQ(b.at("max_seqlen"), expected[m].max_seqlen);
    }
  }
  const json validation = json::parse(std::ifstream(dir / "validation.json"));
  ASSERT_EQ(static_cast<int64_t>(validation.at("windows").size()), run.val_loader().steps());
  EXPECT_EQ(read_file<int32_t>(dir, validation["windows"][0].at("inputs")), run.val_loader().window(0).inputs);
}

TEST(BatchDump, AnEmptyFolderValueAndAnUnwritableFolderAreNamed) {
  test::RunScratch scratch;
  RunOptions o = test::short_run(scratch, "dumped");
  o.overrides.push_back("debug.dump_batches=");
  EXPECT_THROW(
      {
        try {
          take_debug_switches(o);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("debug.dump_batches expects a folder"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  RunOptions p = test::short_run(scratch, "dumped");
  std::ofstream(scratch.root() / "file") << "x";
  p.dump_batches = scratch.root() / "file" / "below";
  try {
    TrainingRun run = test::standin_run(p);
    ADD_FAILURE() << "accepted a folder below a file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("debug.dump_batches=" + p.dump_batches.string()), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gpt
