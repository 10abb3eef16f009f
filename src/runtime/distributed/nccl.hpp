// SPDX-License-Identifier: Apache-2.0
// NCCL's C API, resolved from the library at run time. The types are declared here (their ABI is stable
// since NCCL 2.0) so that fusion builds without nccl.h; tests check them against nccl.h where it exists.
#pragma once
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "runtime/cuda/shared_library.hpp"

#include "fusion/distributed.hpp"
#include "fusion/dtype.hpp"

struct CUstream_st;

namespace fusion::detail::nccl {

using Result = int;  // ncclResult_t: 0 is ncclSuccess
struct CommOpaque;
using Comm = CommOpaque*;  // ncclComm_t
struct UniqueId {
  char internal[128];  // NCCL_UNIQUE_ID_BYTES
};
enum class DataType : int {
  int8 = 0,
  uint8 = 1,
  int32 = 2,
  uint32 = 3,
  int64 = 4,
  uint64 = 5,
  float16 = 6,
  float32 = 7,
  float64 = 8,
  bfloat16 = 9
};
enum class RedOp : int { sum = 0, prod = 1, max = 2, min = 3, avg = 4 };
constexpr Result kInProgress = 7;  // ncclInProgress: a nonblocking communicator's call has not finished

/// The first fields of ncclConfig_t, as NCCL 2.14 defined them: NCCL reads `size` bytes of a config and gives
/// the fields a config of an older `version` lacks their defaults, so this prefix works with every later NCCL.
struct Config {
  std::size_t size = sizeof(Config);
  unsigned int magic = 0xcafebeef;
  unsigned int version = 21400;  // NCCL_VERSION(2, 14, 0)
  int blocking = -2147483647 - 1;  // NCCL_CONFIG_UNDEF_INT
  int cga_cluster_size = -2147483647 - 1;
  int min_ctas = -2147483647 - 1;
  int max_ctas = -2147483647 - 1;
  const char* net_name = nullptr;
};

#define FUSION_NCCL_FUNCTIONS(X)                                                                               \
  X(ncclGetVersion, Result(int*))                                                                              \
  X(ncclGetErrorString, const char*(Result))                                                                   \
  X(ncclGetUniqueId, Result(UniqueId*))                                                                        \
  X(ncclCommInitRank, Result(Comm*, int, UniqueId, int))                                                       \
  X(ncclCommInitAll, Result(Comm*, int, const int*))                                                           \
  X(ncclCommDestroy, Result(Comm))                                                                             \
  X(ncclCommCuDevice, Result(Comm, int*))                                                                      \
  X(ncclCommAbort, Result(Comm))                                                                               \
  X(ncclCommGetAsyncError, Result(Comm, Result*))                                                              \
  X(ncclAllReduce, Result(const void*, void*, std::size_t, DataType, RedOp, Comm, CUstream_st*))               \
  X(ncclReduce, Result(const void*, void*, std::size_t, DataType, RedOp, int, Comm, CUstream_st*))             \
  X(ncclBroadcast, Result(const void*, void*, std::size_t, DataType, int, Comm, CUstream_st*))                 \
  X(ncclAllGather, Result(const void*, void*, std::size_t, DataType, Comm, CUstream_st*))                      \
  X(ncclGroupStart, Result())                                                                                  \
  X(ncclGroupEnd, Result())

struct Api {
#define FUSION_NCCL_MEMBER(name, type) std::add_pointer_t<type> name = nullptr;
  FUSION_NCCL_FUNCTIONS(FUSION_NCCL_MEMBER)
#undef FUSION_NCCL_MEMBER
  /// NCCL 2.14 and later (null before): a communicator that joins without blocking, so that a rank can give up
  /// on a group whose other ranks never come.
  Result (*ncclCommInitRankConfig)(Comm*, int, UniqueId, int, Config*) = nullptr;
  Version version;
  std::string path;  // the library that was loaded
};

/// One attempt over `candidates` (paths or sonames, in order).
using Loaded = LoadedLibrary<Api>;
Loaded load(const std::vector<std::string>& candidates);

/// Where fusion looks, in order (FUSION_NCCL_LIBRARY, libnccl.so.2, the toolkit's lib64/ and lib/).
std::vector<std::string> default_candidates();

/// The process's attempt, made once (sets NCCL_NVLS_ENABLE=0 unless the environment sets it).
const Loaded& loaded();
/// The process's NCCL; throws NcclError when it cannot be used.
const Api& api();

/// NCCL's type for `d`; a TypeError for dtypes NCCL lacks (bool, 16-bit integers).
DataType data_type(DType d);
RedOp red_op(Combine how);

/// Throws NcclError naming `call` and NCCL's message when `r` is not success.
void check(Result r, const char* call);

/// For a nonblocking communicator: waits until the call that returned `r` on `comm` has finished (polling
/// ncclCommGetAsyncError), then checks its result as check() does. `r` other than kInProgress is checked at once.
void finish(Comm comm, Result r, const char* call);

}  // namespace fusion::detail::nccl
