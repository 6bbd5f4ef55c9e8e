// Running one batch over several processes (MPI ranks), in one place. Built in two ways:
//
//   serial build (default)   size() is 1; a process that an MPI launcher started as one of several
//                            ranks is refused by start(), instead of doing the whole job R times.
//   MPI build (-DATTN_MPI)   start() joins MPI when a launcher started the process (mpirun, srun);
//                            otherwise the tool is the serial one.
//
// Ranks split the batch axis into contiguous ranges of whole chunks (items()), so every chunk is
// the chunk one process computes and the output bytes are the same. The HDF5 layer writes their
// rows into one file opened by all ranks (h5io.hpp, OutputFile). Failure is collective: before
// every collective step the ranks agree (checkpoint()); a rank that failed takes part in that
// agreement from its error path (fail_together()), so all ranks stop, and one prints the error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attn::mpi {

// How many ranks the launcher started, from its environment (OMPI_COMM_WORLD_SIZE, PMI_SIZE,
// PMIX_SIZE, SLURM_NTASKS under srun); 1 when no launcher did.
int launcher_size();
// This process's rank according to the launcher (0 when none): without MPI, only rank 0 speaks.
int launcher_rank();

// Joins MPI when launched as above (MPI build). Throws UsageError when the serial build was
// started as one of several ranks, or when `splits_batch` is false (a tool that does not split its
// work, such as pe-gen) with more than one rank. Idempotent.
void start(const std::string& tool, bool splits_batch);
// Leaves MPI (at the end of the process; every rank must call it).
void stop();

bool active(); // MPI joined (even with one rank)
int rank();    // 0 when not active
int size();    // 1 when not active

// Items [first, last) of `total` for this rank: contiguous, starting at a multiple of `chunk`,
// whole chunks balanced over the ranks (a rank may get none).
struct Items {
  std::int64_t first = 0, last = 0;
  std::int64_t count() const { return last - first; }
};
Items items(std::int64_t total, std::int64_t chunk);
// The same for rank `rank` of `ranks`.
Items items_of(int rank, int ranks, std::int64_t total, std::int64_t chunk);

// Thrown by checkpoint() when another rank failed: it has printed the error; this rank stops
// quietly with `status`.
struct PeerFailed {
  int status;
};
// Collective: throws PeerFailed when any rank failed since the last checkpoint.
void checkpoint();
// Collective, from a rank's error path: agrees with the other ranks' checkpoint (or their own
// failures). Returns true when this rank is the lowest one that failed (it prints the error), and
// sets `status` to that rank's exit status.
bool fail_together(int& status);

// Collective: the largest v over the ranks.
std::int64_t max_over_ranks(std::int64_t v);
double max_over_ranks(double v);
// Collective: `data` holds `total` items of `item_bytes` bytes; each rank has filled its own
// items(total, chunk). Afterwards every rank holds all of them.
void share_items(void* data, std::int64_t item_bytes, std::int64_t total, std::int64_t chunk);
// Collective: rank 0's `s` on every rank.
std::string broadcast(const std::string& s);
// Collective: waits for every rank.
void barrier();

} // namespace attn::mpi
