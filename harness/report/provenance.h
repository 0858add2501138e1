#pragma once
// What ran: each run's own environment as its trainer reported it (OUT/ID.json: commit, dirty flag, build type,
// GPU, driver, CUDA and NCCL versions), grouped by equal environments, with the fields in which the groups
// differ. A run whose trainer reported nothing carries the harness's probe of the submitting machine instead;
// the report says so rather than passing the probe off as the trainer's build.
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/store/store.h"

namespace gpt::harness {

struct ProvenanceGroup {
  Environment environment;
  bool from_trainer = true;  // false: the harness's probe (the trainer wrote no environment)
  // What the runs' trainers reported beside the environment row, kept as run params (kRunDetails): (label, value),
  // "-" where none was reported.
  std::vector<std::pair<std::string, std::string>> details;
  std::vector<std::string> runs;  // "arm seed N" / run ids of the runs with this environment, in run order
};

// The run params (harvest.cpp, from the trainer's summary) a report shows with the environment: (param, label).
inline constexpr std::pair<const char*, const char*> kRunDetails[] = {{"gpu_uuid", "GPU UUID"},
                                                                      {"gpu_clocks", "GPU clocks"},
                                                                      {"gpu_power_limit", "GPU power limit"},
                                                                      {"threads", "threads"},
                                                                      {"recipe_hash", "recipe hash"}};

struct Provenance {
  std::vector<ProvenanceGroup> groups;        // one per distinct environment, first seen first
  std::vector<std::string> differing_fields;  // labels of the fields whose values differ between groups
  std::size_t runs_without_environment = 0;   // runs stored without any environment row
  bool runs_differ() const { return groups.size() > 1; }
};

// The (label, value) pairs a report shows for an environment, in display order; "-" for an empty value.
std::vector<std::pair<std::string, std::string>> environment_fields(const Environment& environment);
// A group's environment fields followed by its run details.
std::vector<std::pair<std::string, std::string>> group_fields(const ProvenanceGroup& group);

// Groups the runs' environments. A run's environment counts as its trainer's unless it is the sweep's own
// probe row and the run has no `trainer_commit` param (harvest sets it from the trainer's report).
Provenance collect_provenance(Store& store, const SweepInfo& sweep, const std::vector<const RunRecord*>& runs);

nlohmann::json provenance_json(const Provenance& provenance);
std::string provenance_text(const Provenance& provenance);      // plain lines for the console report
std::string provenance_markdown(const Provenance& provenance);  // "## Environment" section
std::string provenance_html(const Provenance& provenance);      // "<h2>Environment</h2>" section

}  // namespace gpt::harness
