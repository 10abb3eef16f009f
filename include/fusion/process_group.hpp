// SPDX-License-Identifier: Apache-2.0
// Several processes, one GPU each (issue 18): an NCCL communicator over the processes of a job, joined
// through a file, the environment, MPI (fusion/mpi.hpp) or any channel that carries an NcclId.
//
//   auto group = fz::ProcessGroup::from_environment();   // FUSION_RANK, FUSION_WORLD_SIZE, ...
//   auto x = group.local_piece(host_x, {n});              // this rank's slab, on its GPU
//   fz::Array<float> d = fz::sum(x * x);
//   group.all_reduce(d);                                  // the total on every rank
#pragma once
#include <string>
#include <vector>

#include "fusion/sharded.hpp"

namespace fusion {

/// One process of a group that runs one GPU each, on one host or many: an NCCL communicator bootstrapped
/// through a file all processes can read (a shared filesystem), so that any launcher can start them. Rank
/// 0 writes a fresh ncclUniqueId to `id_file` (atomically, by rename) and removes it once every rank has
/// joined; the others wait up to `timeout_s` for it, and every rank waits as long for the others to join (an
/// NcclError names what to check). Use a path unique to the job. Every constructor makes the group's device
/// the calling thread's current device (as a rank's first step usually is).
class ProcessGroup {
 public:
  ProcessGroup(const std::string& id_file, int rank, int size, int device, double timeout_s = 60);
  /// Joins the group of `size` processes that `id` names (ProcessGroup::new_id() on one of them, passed to
  /// the others by any channel: fusion/mpi.hpp does it with MPI). Returns once every rank has joined; an
  /// NcclError after `timeout_s` if some rank has not (with NCCL 2.14 or later; an older one waits for good).
  ProcessGroup(const NcclId& id, int rank, int size, int device, double timeout_s = 60);
  /// A fresh id for a new group (NCCL's ncclGetUniqueId); an NcclError where NCCL does not load.
  static NcclId new_id();
  /// From the environment: FUSION_RANK and FUSION_WORLD_SIZE (else RANK and WORLD_SIZE, as torchrun and
  /// many launchers set them), the device FUSION_DEVICE (else LOCAL_RANK, else 0), FUSION_NCCL_ID_FILE.
  static ProcessGroup from_environment(double timeout_s = 60);
  ProcessGroup(ProcessGroup&& o) noexcept;
  ProcessGroup& operator=(ProcessGroup&&) = delete;
  ProcessGroup(const ProcessGroup&) = delete;
  ~ProcessGroup();
  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }
  /// This rank's piece of host `data` (C order, `shape`) split along `axis` over the group's ranks as
  /// Sharded::from_host splits over devices: `sizes` (one extent per rank, zeros allowed), else
  /// numpy.array_split's rule; on this process's GPU.
  template <Element T> Array<T> local_piece(std::span<const T> data, const Shape& shape, int axis = 0,
                                            std::vector<std::int64_t> sizes = {}) const {
    if (static_cast<std::int64_t>(data.size()) != numel(shape))
      throw ShapeError("ProcessGroup::local_piece: " + std::to_string(data.size()) + " elements for a shape of " +
                       to_string(shape));
    sizes =
        detail::split_plan("ProcessGroup::local_piece", shape, axis, static_cast<std::size_t>(size_), std::move(sizes));
    std::int64_t begin = 0;
    for (int r = 0; r < rank_; ++r) begin += sizes[static_cast<std::size_t>(r)];
    Shape piece = shape;
    piece[axis] = sizes[static_cast<std::size_t>(rank_)];
    detail::HostSlab<T> slab(numel(piece));
    detail::extract_slab(data.data(), shape, axis, begin, piece[axis], sizeof(T), slab.data());
    DeviceScope on{Device(device_)};
    return asarray(slab.span(), piece);
  }
  template <Element T> Array<T> local_piece(const std::vector<T>& data, const Shape& shape, int axis = 0,
                                            std::vector<std::int64_t> sizes = {}) const {
    std::optional<detail::HostSlab<T>> keep;
    return local_piece(detail::host_span(data, keep), shape, axis, std::move(sizes));
  }
  /// Combines `a` element by element over the group's processes, in place, on its device's current stream.
  template <Element T> void all_reduce(Array<T>& a, Combine how = Combine::sum) { combine(a, how, -1); }
  /// The same combination written only into rank `root`'s array (NCCL's reduce: less traffic than
  /// all_reduce when one process needs the result).
  template <Element T> void reduce_to(Array<T>& a, int root, Combine how = Combine::sum) {
    if (root < 0) throw Error("ProcessGroup::reduce_to: root " + std::to_string(root) + " is not a rank");
    combine(a, how, root);
  }

 private:
  void combine(ArrayBase& a, Combine how, int root);  // root -1: every rank
  static NcclId id_through_file(const std::string& id_file, int rank, int size, int device, double timeout_s);
  void* comm_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0;
};

namespace detail {
/// The 128 bytes of an ncclUniqueId from `path`, waiting up to `timeout_s` for the file to appear whole;
/// an Error names the file and the rank that should have written it.
std::string read_unique_id(const std::string& path, double timeout_s);
/// Writes `id` to `path` through a temporary file and a rename, so no reader sees it half-written.
void write_unique_id(const std::string& path, const std::string& id);
}  // namespace detail

}  // namespace fusion
