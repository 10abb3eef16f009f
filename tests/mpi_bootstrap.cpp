// SPDX-License-Identifier: Apache-2.0
// fusion/mpi.hpp under mpirun (ctest entry mpi.bootstrap: 2 ranks). Without a GPU: NCCL's id reaches every
// rank byte for byte where NCCL loads, and every rank is refused alike (no rank left waiting) where it or
// a GPU is missing. With GPUs: a group over the ranks that have one each (NCCL takes one rank per GPU: one
// on the H100 machine, two on the 2-GPU one) all-reduces and reduces against the expected values.
// Plain main, not Catch2: every rank reports its failures, rank 0 the verdict, the exit status the sum.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <string>
#include <vector>

#include "fusion/fusion.hpp"
#include "fusion/mpi.hpp"

namespace fz = fusion;

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int failures = 0;
  auto expect = [&](bool ok, const std::string& what) {
    if (!ok) ++failures, fmt::print(stderr, "rank {}: FAILED: {}\n", rank, what);
  };
  auto all = [](int v, MPI_Op op) {
    int r = 0;
    MPI_Allreduce(&v, &r, 1, MPI_INT, op, MPI_COMM_WORLD);
    return r;
  };

  // 1. NCCL's id: the same bytes on every rank, or the same refusal on every rank
  fz::NcclId id;
  int have_id = 0;
  try {
    id = fz::nccl_id_from_mpi();
    have_id = 1;
  } catch (const fz::Error& e) {
    if (rank == 0) fmt::print("no NCCL id: {}\n", e.what());
  }
  expect(all(have_id, MPI_MIN) == all(have_id, MPI_MAX), "every rank has the id, or none");
  expect(have_id == int(fz::nccl_available()), "the id exists exactly where NCCL loads");
  if (have_id) {
    std::vector<char> ids(id.bytes.size() * static_cast<std::size_t>(size));
    MPI_Allgather(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_CHAR, ids.data(),
                  static_cast<int>(id.bytes.size()), MPI_CHAR, MPI_COMM_WORLD);
    for (int r = 0; r < size; ++r)
      expect(
          std::equal(id.bytes.begin(), id.bytes.end(), ids.begin() + r * static_cast<std::ptrdiff_t>(id.bytes.size())),
          fmt::format("rank {}'s id equals this rank's", r));
    expect(std::any_of(id.bytes.begin(), id.bytes.end(), [](char c) { return c != 0; }), "the id is not all zeros");
  }

  // 2. a group, or a refusal on every rank
  const int gpus = fz::device_count();
  if (gpus == 0 || !have_id) {
    int refused = 0;
    try {
      fz::process_group_from_mpi();
    } catch (const fz::Error& e) {
      refused = 1;
      if (rank == 0) fmt::print("process_group_from_mpi refused: {}\n", e.what());
    }
    expect(refused == 1, "process_group_from_mpi throws without a GPU or NCCL");
  } else {
    MPI_Comm sub;  // one rank per GPU
    MPI_Comm_split(MPI_COMM_WORLD, rank < gpus ? 0 : MPI_UNDEFINED, rank, &sub);
    if (sub != MPI_COMM_NULL) {
      const int n = std::min(size, gpus);
      {
        auto group = fz::process_group_from_mpi(sub);
        expect(group.rank() == rank && group.size() == n, fmt::format("rank {} of {}", group.rank(), group.size()));
        expect(group.device() == rank, fmt::format("device {} (the local rank)", group.device()));
        fz::DeviceScope on{fz::Device(group.device())};
        auto a = fz::full<float>({(1 << 20) + 3}, static_cast<float>(rank + 1));
        group.all_reduce(a);
        const auto h = a.to_host();
        expect(std::all_of(h.begin(), h.end(), [&](float v) { return v == static_cast<float>(n * (n + 1) / 2); }),
               "all_reduce sum");
        auto b = fz::full<std::int64_t>({7}, rank);
        group.reduce_to(b, 0, fz::Combine::max);
        if (rank == 0) expect(b.to_host()[6] == n - 1, "reduce_to max on rank 0");
        if (rank == 0) fmt::print("a group of {} rank(s) over MPI: all_reduce and reduce_to ok\n", n);
      }
      MPI_Comm_free(&sub);
    }
  }
  const int total = all(failures, MPI_SUM);
  if (rank == 0)
    fmt::print("mpi bootstrap over {} ranks: {}\n", size,
               total ? fmt::format("{} failure(s)", total) : std::string("ok"));
  MPI_Finalize();
  return total ? 1 : 0;
}
