// MPI ranks: the one place that includes <mpi.h>; the split of a batch over ranks and failing
// together (mpi.hpp).
#include "attn/core/mpi.hpp"

#include "attn/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#ifdef ATTN_HAVE_MPI
#include <mpi.h>
#endif

namespace attn::mpi {

int launcher_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* v = std::getenv(var)) {
      const int n = std::atoi(v);
      if (n > 0) return n;
    }
  }
  // srun: one task per process of a step (SLURM_NTASKS alone is set inside any allocation)
  if (std::getenv("SLURM_STEP_ID") && std::getenv("SLURM_NTASKS"))
    return std::max(1, std::atoi(std::getenv("SLURM_NTASKS")));
  return 1;
}

int launcher_rank() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"})
    if (const char* v = std::getenv(var)) return std::atoi(v);
  if (std::getenv("SLURM_STEP_ID") && std::getenv("SLURM_PROCID")) return std::atoi(std::getenv("SLURM_PROCID"));
  return 0;
}

namespace {
bool joined = false;
int my_rank = 0, ranks = 1;
} // namespace

void start(const std::string& tool, bool splits_batch) {
  if (joined) return;
  const int launched = launcher_size();
#ifdef ATTN_HAVE_MPI
  if (launched <= 1 && !std::getenv("OMPI_COMM_WORLD_SIZE")) return; // not under a launcher: serial
  // Open MPI's default MPI-IO component (ompio) prints its own lines when a write fails (a full
  // disk); ROMIO only returns the error, so the tool's one line is all the user sees. A user's
  // own choice (OMPI_MCA_io in the environment) stands.
  setenv("OMPI_MCA_io", "romio321", 0);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) MPI_Init(nullptr, nullptr);
  joined = true;
  MPI_Comm_rank(MPI_COMM_WORLD, &my_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (!splits_batch && ranks > 1)
    throw UsageError(
        fmt::format("{} does not split its work over MPI ranks; run it as one process, not as {} ranks", tool, ranks));
#else
  (void)splits_batch;
  if (launched > 1)
    throw UsageError(fmt::format("this {} was built without MPI and was started as one of {} ranks, which would each "
                                 "do the whole job; run it as one process, or build with -DATTN_MPI=ON",
                                 tool, launched));
#endif
}

void stop() {
#ifdef ATTN_HAVE_MPI
  if (joined) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
#endif
  joined = false;
}

bool active() { return joined; }
int rank() { return my_rank; }
int size() { return ranks; }

Items items_of(int r, int ranks_, std::int64_t total, std::int64_t chunk) {
  chunk = std::max<std::int64_t>(chunk, 1);
  const std::int64_t chunks = (total + chunk - 1) / chunk, R = ranks_;
  const std::int64_t c0 = chunks * r / R, c1 = chunks * (r + 1) / R;
  return {std::min(total, c0 * chunk), std::min(total, c1 * chunk)};
}

Items items(std::int64_t total, std::int64_t chunk) { return items_of(rank(), size(), total, chunk); }

namespace {

// The agreement both checkpoint() and fail_together() take part in: the least of every rank's
// value, INT_MAX for a rank that is fine, rank * 4 + status for one that failed.
int agree(int value) {
#ifdef ATTN_HAVE_MPI
  if (!joined) return value;
  int least = value;
  MPI_Allreduce(&value, &least, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return least;
#else
  return value;
#endif
}

} // namespace

void checkpoint() {
  const int least = agree(INT_MAX);
  if (least != INT_MAX) throw PeerFailed{least % 4};
}

bool fail_together(int& status) {
  const int least = agree(my_rank * 4 + std::clamp(status, 1, 3));
  status = least % 4;
  return least / 4 == my_rank;
}

std::int64_t max_over_ranks(std::int64_t v) {
#ifdef ATTN_HAVE_MPI
  if (joined) {
    checkpoint();
    std::int64_t m = v;
    MPI_Allreduce(&v, &m, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    return m;
  }
#endif
  return v;
}

double max_over_ranks(double v) {
#ifdef ATTN_HAVE_MPI
  if (joined) {
    checkpoint();
    double m = v;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
  }
#endif
  return v;
}

void share_items(void* data, std::int64_t item_bytes, std::int64_t total, std::int64_t chunk) {
#ifdef ATTN_HAVE_MPI
  if (!joined || ranks == 1) return;
  checkpoint();
  // Allgatherv counts are ints: send in pieces of at most 1 GiB per rank.
  std::vector<int> counts(static_cast<std::size_t>(ranks)), displs(static_cast<std::size_t>(ranks));
  auto* bytes = static_cast<char*>(data);
  const std::int64_t piece = std::int64_t{1} << 30;
  std::int64_t longest = 0;
  for (int r = 0; r < ranks; ++r) longest = std::max(longest, items_of(r, ranks, total, chunk).count() * item_bytes);
  for (std::int64_t off = 0; off < longest; off += piece) {
    for (int r = 0; r < ranks; ++r) {
      const Items it = items_of(r, ranks, total, chunk);
      const std::int64_t len = it.count() * item_bytes;
      counts[static_cast<std::size_t>(r)] = static_cast<int>(std::clamp<std::int64_t>(len - off, 0, piece));
      displs[static_cast<std::size_t>(r)] = 0;
    }
    // Each rank's piece lands at its own offset: gather into a scratch buffer, then place.
    std::vector<char> gathered;
    std::int64_t sum = 0;
    for (int r = 0; r < ranks; ++r) {
      displs[static_cast<std::size_t>(r)] = static_cast<int>(sum);
      sum += counts[static_cast<std::size_t>(r)];
    }
    gathered.resize(static_cast<std::size_t>(sum));
    const Items mine = items(total, chunk);
    MPI_Allgatherv(bytes + mine.first * item_bytes + off, counts[static_cast<std::size_t>(my_rank)], MPI_BYTE,
                   gathered.data(), counts.data(), displs.data(), MPI_BYTE, MPI_COMM_WORLD);
    for (int r = 0; r < ranks; ++r)
      std::memcpy(bytes + items_of(r, ranks, total, chunk).first * item_bytes + off,
                  gathered.data() + displs[static_cast<std::size_t>(r)],
                  static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]));
  }
#else
  (void)data, (void)item_bytes, (void)total, (void)chunk;
#endif
}

std::string broadcast(const std::string& s) {
#ifdef ATTN_HAVE_MPI
  if (joined && ranks > 1) {
    std::int64_t len = static_cast<std::int64_t>(s.size());
    MPI_Bcast(&len, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    std::string out = my_rank == 0 ? s : std::string(static_cast<std::size_t>(len), '\0');
    MPI_Bcast(out.data(), static_cast<int>(len), MPI_CHAR, 0, MPI_COMM_WORLD);
    return out;
  }
#endif
  return s;
}

void barrier() {
#ifdef ATTN_HAVE_MPI
  if (joined) MPI_Barrier(MPI_COMM_WORLD);
#endif
}

} // namespace attn::mpi
