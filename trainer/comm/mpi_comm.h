#pragma once
// The MPI communicator of CPU ranks (one process per rank, started by mpirun, srun or `train_gpt --ranks N`).
// Every reduction gathers the ranks' buffers and combines them in rank order with the thread ranks' code
// (rank_order_reduce.h), so results are bitwise those of ThreadRankGroup and independent of the MPI library's own
// reduction order. This is the only file pair that knows MPI; <mpi.h> stays inside mpi_comm.cpp.
//
// Faults: every collective polls instead of blocking, and while it waits it
//  - receives failure notes of other ranks (notify_failure) and throws PeerFailure naming the rank;
//  - throws when this process received SIGTERM or SIGINT (the run then ends like any failure);
//  - throws after the watchdog timeout (SPEEDRUN_COLLECTIVE_TIMEOUT_S, default 600 s): a rank that never arrives
//    cannot hang the others.
// After a failure MPI_Finalize could wait for ranks that are gone, so the job ends with MPI_Abort instead
// (end_job_after_failure): rank 0 aborts at once (after the run has written its summary), the other ranks give
// rank 0 kAbortGrace to do so and then abort themselves.
#include <chrono>
#include <cstddef>
#include <memory>
#include <span>

#include "trainer/comm/collective_watchdog.h"  // the timeout setting both transports share
#include "trainer/comm/comm.h"

namespace gpt {

inline constexpr std::chrono::seconds kAbortGrace{10};

// Whether this build links MPI (SPEEDRUN_HAVE_MPI).
bool mpi_available();

// Initialises MPI (once per process) and returns a communicator over MPI_COMM_WORLD. Throws when MPI's world
// size differs from `expected_world_size` (e.g. WORLD_SIZE set by hand without an MPI launcher).
std::unique_ptr<Comm> make_mpi_comm(int expected_world_size, std::chrono::milliseconds collective_timeout);

// Rank `root`'s bytes to every rank of MPI_COMM_WORLD (initialising MPI when needed; MPI is finalised at exit).
// Used for the NCCL unique id when the ranks were started by mpirun or srun.
void mpi_broadcast_bytes(std::span<std::byte> bytes, int root, int expected_world_size);

}  // namespace gpt
