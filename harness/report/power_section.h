#pragma once
// The power-analysis section of reports and of `harness plan`: how many runs reach the wanted power at the
// estimated mean/std, and the smallest improvement each run count can prove.
#include <nlohmann/json.hpp>
#include <string>

#include "harness/stats/power.h"

namespace gpt::harness {

std::string power_text(const stats::PowerPlan& plan, const std::string& indent = "");
std::string power_markdown(const stats::PowerPlan& plan);
nlohmann::json power_json(const stats::PowerPlan& plan);

// The run counts shown by default: 2, 4, 8, ..., 128, plus `observed` (the runs a sweep has) when >= 2.
std::vector<std::size_t> default_power_rows(std::size_t observed = 0);

}  // namespace gpt::harness
