#pragma once
// Creating run and report folders and opening the files the harness writes there without following symbolic
// links: a link planted in the output tree beforehand (`runs/S -> /elsewhere`, `console.log -> ../victim`) is
// refused with an error naming it, never written through.
#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace gpt::harness {

// Creates `root/relative` one component at a time (mkdirat, then openat with O_NOFOLLOW | O_DIRECTORY): a
// component that exists as a symbolic link or a file is an error naming it. `root` itself (the database's folder,
// the user's choice) is created with its parents as needed and may be a link. `relative` must be relative and
// free of `..`.
void make_folders_below(const std::filesystem::path& root, const std::filesystem::path& relative);

// open(2) of `path` with O_NOFOLLOW | O_CLOEXEC added to `flags`; throws gpt::Error naming the file (and saying
// when it is a symbolic link) instead of returning -1.
int open_without_following(const std::filesystem::path& path, int flags, mode_t mode = 0644);

// Empties the folder `dir` but for the entries named in `keep`: each other entry is removed, a symbolic link as the
// link itself (never what it points to), a folder with everything in it. A missing `dir` is left missing. Throws
// gpt::Error naming the entry that cannot be removed.
void empty_folder(const std::filesystem::path& dir, const std::vector<std::string>& keep);

}  // namespace gpt::harness
