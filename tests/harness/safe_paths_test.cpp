// Names that become folders (sweep names, run ids) and folders created without following symbolic links.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include "harness/launcher/atomic_file.h"
#include "harness/launcher/safe_files.h"
#include "harness/launcher/safe_names.h"
#include "tests/harness/e2e_fixture.h"

namespace gpt::harness {
namespace {

TEST(SafeNames, PathsDotsWhitespaceAndNewlinesAreNotNames) {
  for (const char* bad : {"", "/abs/name", "../../x", "..", ".", ".hidden", "-rf", "a/b", "a b", "a\nb", "tab\t"}) {
    EXPECT_TRUE(path_name_problem(bad).has_value()) << "'" << bad << "'";
  }
  EXPECT_TRUE(path_name_problem(std::string(129, 'a')).has_value());
  for (const char* good : {"sweep", "record-tiny-20261206-044700", "w2", "a.b_c+d=e@f,g", "2026"}) {
    EXPECT_FALSE(path_name_problem(good).has_value()) << good << ": " << *path_name_problem(good);
  }
}

TEST(SafeNames, ErrorNamesTheFlagAndShowsControlCharacters) {
  try {
    check_path_name("--name", "a\nb");
    FAIL() << "expected an error";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--name 'a\\x0ab'"), std::string::npos) << e.what();
  }
}

TEST(SafeNames, DefaultNamesAreMadeSafe) {
  EXPECT_EQ(to_path_name("record-trainer/recipes/x.toml-1"), "record-trainer_recipes_x.toml-1");
  EXPECT_EQ(to_path_name(".."), "_.");
  EXPECT_EQ(to_path_name(""), "_");
  EXPECT_FALSE(path_name_problem(to_path_name("import-my logs\n")).has_value());
}

TEST(SafeFiles, FoldersAreCreatedBelowTheRoot) {
  testing::TempDir dir;
  make_folders_below(dir / "db", "runs/sweep");
  EXPECT_TRUE(std::filesystem::is_directory(dir / "db" / "runs" / "sweep"));
  make_folders_below(dir / "db", "runs/sweep");  // again: already there
}

TEST(SafeFiles, PlantedLinkInPlaceOfAFolderIsRefused) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir / "db" / "runs");
  std::filesystem::create_directories(dir / "victim");
  std::filesystem::create_directory_symlink(dir / "victim", dir / "db" / "runs" / "sweep");
  try {
    make_folders_below(dir / "db", "runs/sweep/sweep-seed0");
    FAIL() << "expected an error";
  } catch (const gpt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir / "victim"));
}

TEST(SafeFiles, OpeningAPlantedLinkIsRefusedAndAtomicWritesReplaceIt) {
  testing::TempDir dir;
  const auto victim = dir.write("victim", "keep");
  std::filesystem::create_symlink(victim, dir / "console.log");
  EXPECT_THROW(open_without_following(dir / "console.log", O_WRONLY | O_APPEND), gpt::Error);
  std::filesystem::create_symlink(victim, dir / "report.md");
  write_text_atomically(dir / "report.md", "report");
  EXPECT_FALSE(std::filesystem::is_symlink(dir / "report.md"));
  EXPECT_EQ(read_file(dir / "report.md"), "report");
  EXPECT_EQ(read_file(victim), "keep");
}

}  // namespace
}  // namespace gpt::harness
