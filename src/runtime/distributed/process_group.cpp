// SPDX-License-Identifier: Apache-2.0
// Several processes, one GPU each: an NCCL communicator bootstrapped through a shared file (issue 18).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "fusion/process_group.hpp"
#include "runtime/cuda/driver.hpp"
#include "runtime/distributed/nccl.hpp"
#include "runtime/distributed/collective.hpp"

namespace fusion {

namespace detail {

std::string read_unique_id(const std::string& path, double timeout_s) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      std::string id(sizeof(nccl::UniqueId), '\0');
      if (f.read(id.data(), static_cast<std::streamsize>(id.size())) &&
          f.gcount() == static_cast<std::streamsize>(id.size()))
        return id;
    }
    if (std::chrono::steady_clock::now() >= until)
      throw Error(
          fmt::format("ProcessGroup: no NCCL id in '{}' after {} s: rank 0 writes it when it starts; is rank 0 running "
                      "and does every process see the same path?",
                      path, timeout_s));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void write_unique_id(const std::string& path, const std::string& id) {
  const std::string tmp = fmt::format("{}.{}.tmp", path, ::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(id.data(), static_cast<std::streamsize>(id.size()));
    if (!f.flush()) throw Error(fmt::format("ProcessGroup: cannot write the NCCL id to '{}'", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("ProcessGroup: cannot rename '{}' to '{}': {}", tmp, path, std::strerror(errno)));
  }
}

}  // namespace detail

namespace {
void check_rank(int rank, int size) {
  if (size < 1 || rank < 0 || rank >= size)
    throw Error(fmt::format("ProcessGroup: rank {} of {} processes: ranks run from 0 to size - 1", rank, size));
}
}  // namespace

NcclId ProcessGroup::new_id() {
  detail::nccl::UniqueId fresh{};
  detail::nccl::check(detail::nccl::api().ncclGetUniqueId(&fresh), "ncclGetUniqueId");
  NcclId id;
  std::memcpy(id.bytes.data(), fresh.internal, id.bytes.size());
  return id;
}

NcclId ProcessGroup::id_through_file(const std::string& id_file, int rank, int size, int device, double timeout_s) {
  check_rank(rank, size);
  if (id_file.empty()) throw Error("ProcessGroup: no id file given (a path every process can read, unique to the job)");
  Device{device};  // a missing device is reported before rank 0 writes a file no one would remove
  if (rank == 0) {
    const NcclId id = new_id();
    detail::write_unique_id(id_file, std::string(id.bytes.data(), id.bytes.size()));
    return id;
  }
  const std::string text = detail::read_unique_id(id_file, timeout_s);
  NcclId id;
  std::memcpy(id.bytes.data(), text.data(), id.bytes.size());
  return id;
}

ProcessGroup::ProcessGroup(const std::string& id_file, int rank, int size, int device, double timeout_s)
    : ProcessGroup(id_through_file(id_file, rank, size, device, timeout_s), rank, size, device, timeout_s) {
  if (rank == 0) std::remove(id_file.c_str());  // read by all: a later job cannot pick up this one's id
}

namespace {

/// Joins the group without blocking (NCCL 2.14 and later), giving up after `timeout_s`: a rank that never
/// comes would otherwise hold every other rank in ncclCommInitRank for good.
detail::nccl::Comm join(const detail::nccl::UniqueId& uid, int rank, int size, double timeout_s) {
  const detail::nccl::Api& api = detail::nccl::api();
  detail::nccl::Comm comm = nullptr;
  if (!api.ncclCommInitRankConfig) {  // an older NCCL: it waits for every rank, however long that takes
    detail::nccl::check(api.ncclCommInitRank(&comm, size, uid, rank), "ncclCommInitRank");
    return comm;
  }
  detail::nccl::Config config;
  config.blocking = 0;
  detail::nccl::Result r = api.ncclCommInitRankConfig(&comm, size, uid, rank, &config);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (r == detail::nccl::kInProgress) {
    if (std::chrono::steady_clock::now() >= until) {
      api.ncclCommAbort(comm);
      throw NcclError(fmt::format(
          "ProcessGroup: rank {} of {} waited {} s for the other ranks to join and gave up: start all {} processes, "
          "each with its own rank from 0 to {} and the same NCCL id (or id file)",
          rank, size, timeout_s, size, size - 1));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (api.ncclCommGetAsyncError(comm, &r) != 0) break;
  }
  if (r != 0 && comm) api.ncclCommAbort(comm);
  detail::nccl::check(r, "ncclCommInitRankConfig");
  return comm;
}

}  // namespace

ProcessGroup::ProcessGroup(const NcclId& id, int rank, int size, int device, double timeout_s)
    : rank_(rank), size_(size), device_(device) {
  check_rank(rank, size);
  if (!(timeout_s > 0)) throw Error(fmt::format("ProcessGroup: a timeout of {} s: give a positive number of seconds", timeout_s));
  Device(device).use();  // this process's GPU: its arrays and kernels go there, as each rank expects
  const detail::nccl::Api& api = detail::nccl::api();
  detail::nccl::UniqueId uid{};
  std::memcpy(uid.internal, id.bytes.data(), sizeof uid.internal);
  // NCCL takes the rank's GPU from the CUDA runtime's current device, which is the driver's current
  // context, not fusion's per-thread device: without this every rank claimed device 0 and NCCL refused
  // the group ("invalid usage": two ranks on one GPU).
  detail::make_context_current(device);
  detail::nccl::Comm comm = join(uid, rank, size, timeout_s);  // returns once every rank joined
  comm_ = comm;
  int on = -1;
  if (api.ncclCommCuDevice(comm, &on) != 0 || on != device) {
    api.ncclCommDestroy(comm);
    comm_ = nullptr;
    throw NcclError(
        fmt::format("ProcessGroup: NCCL put rank {} on device {}, not on device {} as asked", rank, on, device));
  }
}

ProcessGroup ProcessGroup::from_environment(double timeout_s) {
  auto get = [](std::initializer_list<const char*> names) -> const char* {
    for (const char* n : names)
      if (const char* v = std::getenv(n); v && *v) return v;
    return nullptr;
  };
  const char* rank = get({"FUSION_RANK", "RANK"});
  const char* size = get({"FUSION_WORLD_SIZE", "WORLD_SIZE"});
  const char* file = get({"FUSION_NCCL_ID_FILE"});
  if (!rank || !size || !file)
    throw Error(
        fmt::format("ProcessGroup::from_environment: set FUSION_RANK (or RANK), FUSION_WORLD_SIZE (or WORLD_SIZE) and "
                    "FUSION_NCCL_ID_FILE; missing: {}{}{}",
                    rank ? "" : "rank ", size ? "" : "world size ", file ? "" : "id file"));
  const char* device = get({"FUSION_DEVICE", "LOCAL_RANK"});
  return ProcessGroup(file, std::atoi(rank), std::atoi(size), device ? std::atoi(device) : 0, timeout_s);
}

ProcessGroup::ProcessGroup(ProcessGroup&& o) noexcept
    : comm_(o.comm_), rank_(o.rank_), size_(o.size_), device_(o.device_) {
  o.comm_ = nullptr;
}

ProcessGroup::~ProcessGroup() {
  if (comm_) detail::nccl::api().ncclCommDestroy(static_cast<detail::nccl::Comm>(comm_));
}

void ProcessGroup::combine(ArrayBase& a, Combine how, int root) {
  const char* who = root < 0 ? "ProcessGroup::all_reduce" : "ProcessGroup::reduce_to";
  if (a.device() != device_)
    throw Error(
        fmt::format("{}: the array is on device {}, this process's group runs on device {}", who, a.device(), device_));
  if (root >= size_) throw Error(fmt::format("{}: root {} is not a rank of this group of {}", who, root, size_));
  const auto comm = static_cast<detail::nccl::Comm>(comm_);  // (nonblocking: finish waits for the enqueue)
  detail::nccl::finish(comm, detail::enqueue_collective(a, comm, how, root, who), root < 0 ? "ncclAllReduce" : "ncclReduce");
}

}  // namespace fusion
