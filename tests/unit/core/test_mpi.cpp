// How ranks split a batch (lib/mpi): contiguous ranges of whole chunks, balanced, covering every
// item once, whatever the rank count; and the one-process defaults of the serial path.
#include "attn/core/mpi.hpp"

#include <doctest/doctest.h>

using namespace attn;

TEST_CASE("mpi::items_of: whole chunks, contiguous, balanced, every item once") {
  for (int ranks = 1; ranks <= 5; ++ranks)
    for (std::int64_t total = 0; total <= 23; ++total)
      for (std::int64_t chunk = 1; chunk <= 6; ++chunk) {
        std::int64_t next = 0, least = total, most = 0;
        for (int r = 0; r < ranks; ++r) {
          const mpi::Items it = mpi::items_of(r, ranks, total, chunk);
          CHECK(it.first == next); // contiguous, in rank order
          CHECK(it.last >= it.first);
          CHECK(it.first % chunk == 0); // each rank's chunks are one process's chunks
          next = it.last;
          const std::int64_t chunks = (it.count() + chunk - 1) / chunk;
          least = std::min(least, chunks), most = std::max(most, chunks);
        }
        CHECK(next == total);
        CHECK(most - least <= 1);
      }
  const mpi::Items tail = mpi::items_of(2, 3, 5, 2); // 3 chunks of 5 items: the last holds one
  CHECK(tail.first == 4);
  CHECK(tail.last == 5);
}

TEST_CASE("mpi: without a launcher the process is the one rank, and agreement is trivial") {
  CHECK(mpi::launcher_size() == 1);
  CHECK(mpi::size() == 1);
  CHECK(mpi::rank() == 0);
  const mpi::Items all = mpi::items(7, 3);
  CHECK(all.first == 0);
  CHECK(all.last == 7);
  CHECK_NOTHROW(mpi::checkpoint());
  int status = 2;
  CHECK(mpi::fail_together(status)); // this process is the lowest rank that failed
  CHECK(status == 2);
  CHECK(mpi::max_over_ranks(std::int64_t{5}) == 5);
  CHECK(mpi::max_over_ranks(2.5) == 2.5);
  CHECK(mpi::broadcast("x") == "x");
}
