#pragma once
// The machine's CPU as /proc/cpuinfo names it: the trainer's run log header and the harness's environment probe
// report the same string.
#include <string>

namespace gpt {

// The first "model name" of /proc/cpuinfo ("" when there is none, e.g. on a machine without that file).
std::string cpu_model();

}  // namespace gpt
