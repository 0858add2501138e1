#include "harness/launcher/atomic_file.h"

#include <fstream>
#include <string>

#include "base/check.h"

namespace gpt::harness {

void write_text_atomically(const std::filesystem::path& path, std::string_view text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    GPT_CHECK(out.good(), "cannot write '", tmp.string(), "'");
    out << text;
    out.flush();
    GPT_CHECK(out.good(), "cannot write '", tmp.string(), "' (disk full?)");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  GPT_CHECK(!ec, "cannot move '", tmp.string(), "' into place at '", path.string(), "': ", ec.message());
}

}  // namespace gpt::harness
