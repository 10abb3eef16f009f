// SPDX-License-Identifier: Apache-2.0
// A ProcessGroup bootstrapped through MPI, for programs that run under mpirun (issue 18). Header-only and
// not included by fusion/fusion.hpp: fusion itself never links MPI; a program that includes this links
// its own (CMake: find_package(MPI COMPONENTS CXX) and MPI::MPI_CXX).
//
//   MPI_Init(&argc, &argv);
//   {
//     auto group = fz::process_group_from_mpi();            // rank and size from MPI_COMM_WORLD
//     group.all_reduce(gradients);                          // NCCL, on this rank's GPU
//   }
//   MPI_Finalize();
#pragma once
#include <mpi.h>

#include <exception>
#include <string>

#include "fusion/device.hpp"
#include "fusion/error.hpp"
#include "fusion/process_group.hpp"

namespace fusion {

/// NCCL's id for a new group, made on rank 0 of `comm` and broadcast to every rank (a collective call:
/// every rank of `comm` makes it). Where rank 0 cannot make one (NCCL missing), every rank throws: rank 0
/// its own error, the others an NcclError pointing at rank 0's, so that no rank waits forever.
inline NcclId nccl_id_from_mpi(MPI_Comm comm = MPI_COMM_WORLD) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  NcclId id;
  char ok = 0;
  std::exception_ptr failure;
  if (rank == 0) {
    try {
      id = ProcessGroup::new_id();
      ok = 1;
    } catch (...) {
      failure = std::current_exception();
    }
  }
  MPI_Bcast(&ok, 1, MPI_CHAR, 0, comm);
  if (!ok) {
    if (failure) std::rethrow_exception(failure);
    throw NcclError("nccl_id_from_mpi: rank 0 could not make NCCL's unique id (its error says why)");
  }
  MPI_Bcast(id.bytes.data(), static_cast<int>(id.bytes.size()), MPI_CHAR, 0, comm);
  return id;
}

/// The rank's index among the ranks of `comm` on its own host (MPI_COMM_TYPE_SHARED): a process's GPU on
/// a machine that runs one process per GPU.
inline int local_rank_from_mpi(MPI_Comm comm = MPI_COMM_WORLD) {
  int rank = 0, local_rank = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm local;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_free(&local);
  return local_rank;
}

/// A ProcessGroup of the ranks of `comm`, one GPU each: `device`, or when -1 the rank's index on its host
/// (local_rank_from_mpi) modulo the host's GPUs. Every rank of `comm` calls it. Returns once all joined.
inline ProcessGroup process_group_from_mpi(MPI_Comm comm = MPI_COMM_WORLD, int device = -1) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (device < 0) {
    const int local = local_rank_from_mpi(comm), gpus = device_count();
    device = gpus > 0 ? local % gpus : local;  // no GPU: the group's constructor says so
  }
  // Every rank checks its device before any joins: one rank failing alone would leave the others waiting
  // in NCCL for it.
  int usable = 1, all_usable = 0;
  std::exception_ptr failure;
  try {
    Device{device};
  } catch (...) {
    usable = 0;
    failure = std::current_exception();
  }
  MPI_Allreduce(&usable, &all_usable, 1, MPI_INT, MPI_MIN, comm);
  if (!all_usable) {
    if (failure) std::rethrow_exception(failure);
    throw Error("process_group_from_mpi: another rank cannot use its GPU (its error says why)");
  }
  const NcclId id = nccl_id_from_mpi(comm);
  return ProcessGroup(id, rank, size, device);
}

}  // namespace fusion
