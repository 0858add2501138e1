#include "trainer/export/batch_dump.h"

#include <string>

#include "base/check.h"

namespace gpt {

namespace {

std::filesystem::path created(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  GPT_CHECK(!ec && std::filesystem::is_directory(dir), "--set debug.dump_batches=", dir.string(),
            ": cannot create the folder (", ec.message(), ")");
  return dir;
}

}  // namespace

BatchDump::BatchDump(const std::filesystem::path& dir)
    : files_(created(dir)), steps_(dir / "steps.jsonl", std::ios::trunc) {
  GPT_CHECK(steps_.good(), "--set debug.dump_batches=", dir.string(), ": cannot create steps.jsonl");
}

void BatchDump::write_validation(const ValLoader& loader) {
  nlohmann::json windows = nlohmann::json::array();
  for (int64_t j = 0; j < loader.steps(); ++j)
    windows.push_back(files_.write_batch("val" + std::to_string(j), loader.window(j)));
  const std::filesystem::path path = files_.dir() / "validation.json";
  std::ofstream out(path, std::ios::trunc);
  out << nlohmann::json{{"windows", windows}}.dump() << '\n';
  out.close();
  GPT_CHECK(out.good(), "writing '", path.string(), "' failed");
}

void BatchDump::write_step(int64_t step, const std::vector<Microbatch>& batches, double train_loss) {
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < batches.size(); ++i)
    list.push_back(files_.write_batch("s" + std::to_string(step) + ".mb" + std::to_string(i), batches[i]));
  steps_ << nlohmann::json{{"step", step}, {"train_loss", train_loss}, {"microbatches", list}}.dump() << '\n';
  steps_.flush();
  GPT_CHECK(steps_.good(), "writing '", (files_.dir() / "steps.jsonl").string(), "' failed");
}

}  // namespace gpt
