#pragma once
// Names that become paths or batch-script text. A sweep name is a folder below `<db folder>/runs` and
// `<db folder>/reports`, and a run id a folder below that and a line of `slurm_job.sh`; Slurm's partition,
// account and QOS become `#SBATCH` lines. All are checked once, where they enter, with one error naming the flag.
#include <optional>
#include <string>
#include <string_view>

namespace gpt::harness {

// Why `name` cannot be one path component (a sweep name, a run id), or nullopt when it can: 1 to 128 characters
// of letters, digits and `. _ - + = @ ,`, not starting with `.` or `-` (so never `.`, `..`, an absolute path, a
// separator, whitespace, a newline or an option).
std::optional<std::string> path_name_problem(std::string_view name);
// Throws gpt::Error "`flag` 'name': <problem>" when path_name_problem finds one.
void check_path_name(std::string_view flag, std::string_view name);

// A name made safe: every character path_name_problem refuses becomes `_` (default sweep names built from
// file names, e.g. `import-<folder>`), cut to 128 characters.
std::string to_path_name(std::string_view text);

// Slurm partition, account and QOS names (comma-separated lists for partitions): letters, digits and
// `_ - . ,`, at most 128 characters; an empty value (not given) passes. check_ throws gpt::Error naming `flag`.
std::optional<std::string> slurm_name_problem(std::string_view value);
void check_slurm_name(std::string_view flag, std::string_view value);

}  // namespace gpt::harness
