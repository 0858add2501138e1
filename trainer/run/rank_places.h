#pragma once
// Where every rank of a run runs (its host and device), for the run log's header and the summary's environment.
#include <string>
#include <vector>

#include "trainer/comm/comm.h"
#include "trainer/run/run_log.h"

namespace gpt {

// Every rank's host and device, gathered over `comm` in rank order (a collective: every rank calls it). `backend`
// and `threads` are the run's flags; `local_rank` is this rank's index on its host (named for CUDA devices).
std::vector<RankPlace> gather_rank_places(Comm& comm, const std::string& backend, int threads, int local_rank);

}  // namespace gpt
