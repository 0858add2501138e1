#pragma once
// What a stored run's result may hold: one definition shared by the log parser, the run-summary reader,
// `record` (harvest_run), `import` and the store itself (Store::add_run and its readers), so a result that breaks
// these rules is stored `failed` with the reason, and a bad row written by an older harness never breaks a report.
#include <cstdint>
#include <optional>
#include <string>

#include "harness/store/store.h"

namespace gpt::harness {

// A validation loss is a cross-entropy, >= 0. A finite negative value is a problem ("is negative: ..."); nan
// and inf are not problems here: they mean divergence, which callers judge.
std::optional<std::string> loss_problem(double loss);

// Step counts: a total of at least 1 and a step within [0, total]. Either may be absent.
std::optional<std::string> steps_problem(std::optional<std::int64_t> step, std::optional<std::int64_t> total);

// Why a run called `ok` cannot be one: no final val loss, a non-finite or negative one, steps outside the total,
// a negative train time or token count; nullopt when it can.
std::optional<std::string> ok_result_problem(const RunRecord& run);

// An `ok` run whose result has an ok_result_problem becomes `failed`, the reason saying why.
void demote_unusable_result(RunRecord& run);

}  // namespace gpt::harness
