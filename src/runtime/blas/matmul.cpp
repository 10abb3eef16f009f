// SPDX-License-Identifier: Apache-2.0
// fz::matmul on cuBLASLt: the layout from schedule/matmul_layout, descriptors and the heuristic's choice
// cached per (device, shapes, layouts, dtype, compute type, alignments), a workspace per stream, the call on
// the current stream. Without a GPU, describe_matmul still says what would run.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "fusion/error.hpp"
#include "fusion/matmul.hpp"
#include "runtime/blas/cublaslt.hpp"
#include "runtime/blas/matmul.hpp"
#include "runtime/blas/written_marks.hpp"
#include "runtime/cuda/device_state.hpp"
#include "runtime/cuda/held_work.hpp"
#include "runtime/cuda/stream_state.hpp"
#include "schedule/matmul_layout.hpp"

namespace fusion::detail {
namespace {

/// cuBLAS's recommended workspace on Hopper (smaller ones exclude some split-K kernels).
constexpr std::size_t kBlasWorkspaceBytes = std::size_t{32} << 20;

cudaDataType_t blas_type(DType d) {
  switch (d) {
    case DType::float16: return CUDA_R_16F;
    case DType::bfloat16: return CUDA_R_16BF;
    case DType::float32: return CUDA_R_32F;
    case DType::float64: return CUDA_R_64F;
    default: throw TypeError(fmt::format("matmul: cuBLASLt multiplies float16, bfloat16, float32 and float64 "
                                         "matrices, not {}", dtype_name(d)));
  }
}

cublasComputeType_t compute_type(DType d) {
  if (d == DType::float64) return CUBLAS_COMPUTE_64F;
  if (d == DType::float32 && mode_flag(Mode::tf32_products)) return CUBLAS_COMPUTE_32F_FAST_TF32;
  return CUBLAS_COMPUTE_32F;  // float32, and float16/bfloat16 accumulating in float32
}

/// The largest power of two up to 256 dividing `address` (cuBLASLt's kernels need their operands' alignment).
std::uint32_t alignment(std::uint64_t address) {
  std::uint32_t a = 256;
  while (a > 1 && address % a != 0) a /= 2;
  return a;
}

/// What selects a cuBLASLt plan: the call's shape, layouts, dtype, compute type and alignments. Compared
/// and hashed bytewise: zeroed first, and no member with padding of its own (a struct copy need not
/// copy padding: BlasMatrix members made equal keys unequal).
struct PlanKey {
  int device;
  unsigned generation;
  DType dtype, out_dtype;  // the operands', the result's (float32 for 16-bit operands: a cast epilogue)
  cublasComputeType_t compute;
  std::int64_t m, n, k, batch;
  std::int64_t layouts[3][5];  // first, second, out: transpose, rows, cols, ld, batch stride
  std::uint32_t align[4];      // b, a, out, residual C (cuBLASLt's A, B, D, C)
  Activation activation;
  bool bias, residual;
  bool operator==(const PlanKey& o) const { return std::memcmp(this, &o, sizeof *this) == 0; }
};
struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const {
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    std::size_t h = 1469598103934665603ull;
    for (std::size_t i = 0; i < sizeof k; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
  }
};

/// The descriptors and the heuristic's algorithm for one PlanKey, kept for the process.
struct BlasPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::size_t workspace = 0;
  bool found = false;     // the heuristic returned an algorithm (none for some epilogues of some dtypes)
  std::mutex bias_mutex;  // the bias pointer is an attribute of the shared descriptor: set and used under it
};

cublasLtMatrixLayout_t make_layout(const cublaslt::Api& lt, cudaDataType_t t, const BlasMatrix& m,
                                   std::int64_t batch) {
  cublasLtMatrixLayout_t l = nullptr;
  cublaslt::check(lt.cublasLtMatrixLayoutCreate(&l, t, static_cast<std::uint64_t>(m.rows),
                                                 static_cast<std::uint64_t>(m.cols), m.ld),
                  "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const std::int32_t count = static_cast<std::int32_t>(batch);
    cublaslt::check(lt.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
                    "cublasLtMatrixLayoutSetAttribute");
    cublaslt::check(lt.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                         &m.batch_stride, sizeof m.batch_stride),
                    "cublasLtMatrixLayoutSetAttribute");
  }
  return l;
}

cublasLtHandle_t handle_for(int device) {
  static std::mutex mu;
  static auto& handles = *new std::unordered_map<int, cublasLtHandle_t>;  // kept for the process
  std::lock_guard lock(mu);
  cublasLtHandle_t& h = handles[device];
  if (!h) cublaslt::check(cublaslt::api().cublasLtCreate(&h), "cublasLtCreate");
  return h;
}

BlasPlan& plan_for(const PlanKey& key, const MatmulLayout& L) {
  static std::mutex mu;
  static auto& plans = *new std::unordered_map<PlanKey, std::unique_ptr<BlasPlan>, PlanKeyHash>;
  {
    std::lock_guard lock(mu);
    if (auto it = plans.find(key); it != plans.end()) return *it->second;
  }
  const cublaslt::Api& lt = cublaslt::api();
  auto p = std::make_unique<BlasPlan>();
  const cudaDataType_t t = blas_type(key.dtype);
  const cudaDataType_t scale = key.dtype == DType::float64 ? CUDA_R_64F : CUDA_R_32F;
  cublaslt::check(lt.cublasLtMatmulDescCreate(&p->desc, key.compute, scale), "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = L.first.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = L.second.transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublaslt::check(lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
                  "cublasLtMatmulDescSetAttribute");
  cublaslt::check(lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
                  "cublasLtMatmulDescSetAttribute");
  if (key.activation != Activation::none || key.bias) {
    const bool bias = key.bias;
    const cublasLtEpilogue_t e =
        key.activation == Activation::relu        ? (bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU)
        : key.activation == Activation::gelu_tanh ? (bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU)
                                                  : CUBLASLT_EPILOGUE_BIAS;
    cublaslt::check(lt.cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e),
                    "cublasLtMatmulDescSetAttribute");
  }
  p->first = make_layout(lt, t, L.first, key.batch);
  p->second = make_layout(lt, t, L.second, key.batch);
  p->out = make_layout(lt, blas_type(key.out_dtype), L.out, key.batch);
  cublasLtMatmulPreference_t pref = nullptr;
  cublaslt::check(lt.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const std::uint64_t most = kBlasWorkspaceBytes;
  lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &most, sizeof most);
  const cublasLtMatmulPreferenceAttributes_t aligns[3] = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 3; ++i)
    lt.cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &key.align[i], sizeof key.align[i]);
  lt.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &key.align[3],
                                          sizeof key.align[3]);
  cublasLtMatmulHeuristicResult_t found{};
  int returned = 0;
  const cublasStatus_t s = lt.cublasLtMatmulAlgoGetHeuristic(handle_for(key.device), p->desc, p->first, p->second,
                                                             p->out, p->out, pref, 1, &found, &returned);
  lt.cublasLtMatmulPreferenceDestroy(pref);
  // (CUBLAS_STATUS_NOT_SUPPORTED: no algorithm for this epilogue with these types, as returned == 0)
  if (s != CUBLAS_STATUS_NOT_SUPPORTED) cublaslt::check(s, "cublasLtMatmulAlgoGetHeuristic");
  p->found = s == CUBLAS_STATUS_SUCCESS && returned > 0;
  p->algo = found.algo;
  p->workspace = found.workspaceSize;
  std::lock_guard lock(mu);
  auto [it, inserted] = plans.emplace(key, std::move(p));
  return *it->second;  // (a thread that lost the race leaves its copy's descriptors unreleased: rare, small)
}

CUdeviceptr blas_workspace(StreamState& s) {
  if (!s.blas_workspace || is_stale(s.blas_workspace_generation, s.device)) {
    FUSION_CU(cuMemAlloc, &s.blas_workspace, kBlasWorkspaceBytes);
    s.blas_workspace_generation = context_generation(s.device);
  }
  return s.blas_workspace;
}

/// Runs `launch(stream, workspace)`: on the current stream with its workspace, or, while an fz::Step
/// records, captured as a node of the step's graph with a workspace of its own (a replay on another
/// stream must not share one with that stream's products). `kind` (bytes) names what runs, for the step
/// to tell an update from a rebuild; the arrays it uses (`used`, nulls skipped) are kept alive by the
/// step's graph; `value` (the scale) is an argument too. (A template: the usual path allocates nothing.)
template <class Launch>
void in_order(std::initializer_list<const ArrayBase*> used, Launch&& launch, const void* kind = nullptr,
              std::size_t kind_bytes = 0, double value = 0) {
  if (tls_step == nullptr) {
    StreamState& s = *current_stream_state();
    return launch(s.handle, blas_workspace(s));
  }
  const ArrayBase workspace = ArrayBase::make_empty(DType::uint8, {static_cast<std::int64_t>(kBlasWorkspaceBytes)});
  std::vector<std::shared_ptr<Storage>> memory{workspace.storage()};
  std::vector<unsigned char> arguments;
  auto append = [&](const void* bytes, std::size_t n) {
    const std::size_t at = arguments.size();
    arguments.resize(at + n);
    std::memcpy(arguments.data() + at, bytes, n);
  };
  auto note = [&](const ArrayBase& x) {
    memory.push_back(x.storage());
    const std::uint64_t address = x.data_ptr();
    append(&address, sizeof address);
  };
  note(workspace);
  for (const ArrayBase* x : used)
    if (x) note(*x);
  append(&value, sizeof value);
  const auto* k = static_cast<const unsigned char*>(kind);
  record_library_call(std::vector<unsigned char>(k, k + kind_bytes), std::move(arguments), std::move(memory),
                      [&](CUstream h) { launch(h, workspace.data_ptr()); });
}

/// Layout `L` of `a @ b`, with operands no layout describes replaced by C-ordered copies (`held`).
MatmulLayout with_copies(MatmulLayout L, const ArrayBase*& a, const ArrayBase*& b, ArrayBase (&held)[2]) {
  if (L.copy_a) held[0] = a->contiguous_copy(), a = &held[0];
  if (L.copy_b) held[1] = b->contiguous_copy(), b = &held[1];
  if (L.copy_a || L.copy_b) L = matmul_layout(a->shape(), a->strides(), b->shape(), b->strides());
  return L;
}

}  // namespace

ArrayBase matmul(const ArrayBase& a, const ArrayBase& b) {
  if (a.dtype() != b.dtype())
    throw TypeError(fmt::format("matmul: operands of {} and {}; promote one first (fz::matmul does)",
                                dtype_name(a.dtype()), dtype_name(b.dtype())));
  (void)blas_type(a.dtype());  // a TypeError for other dtypes, before any work
  ArrayBase out = ArrayBase::make_empty(a.dtype(), matmul_shape(a.shape(), b.shape()));
  (void)matmul_into(a, b, out);  // (no epilogue: true or an error)
  return out;
}

bool matmul_into(const ArrayBase& a_in, const ArrayBase& b_in, ArrayBase& out, Epilogue epilogue, double scale) {
  const DType d = a_in.dtype();
  const DType od = out.dtype();
  const bool widened = od != d;  // 16-bit operands, a float32 result (cuBLASLt converts as it stores)
  if (b_in.dtype() != d || (widened && !(od == DType::float32 && is_16bit_float(d))))
    throw Error("internal: matmul_into takes operands of one dtype, a result of theirs or float32");
  const ArrayBase* a = &a_in;
  const ArrayBase* b = &b_in;
  ArrayBase held[2]{ArrayBase(d), ArrayBase(d)};
  const MatmulLayout probe = matmul_layout(a->shape(), a->strides(), b->shape(), b->strides());  // shape errors first
  if (!(out.shape() == probe.out_shape) || !out.is_contiguous())
    throw Error("internal: matmul_into writes a C-ordered result of the product's shape");
  if (numel(probe.out_shape) == 0) return true;
  const std::shared_ptr<StreamState>& stream = current_stream_state();
  if (probe.k == 0) {  // an empty sum: zeros (cuBLASLt is not asked for k = 0); zero bits are 0.0
    if (epilogue.any()) throw Error("internal: no epilogue for an empty product");
    const std::size_t bytes = static_cast<std::size_t>(numel(probe.out_shape)) * itemsize(od);
    in_order({&out}, [&](CUstream h, CUdeviceptr) { FUSION_CU(cuMemsetD8Async, out.data_ptr(), 0, bytes, h); });
    return true;
  }
  const MatmulLayout L = with_copies(probe, a, b, held);
  PlanKey key{};  // (zeroed: the key is compared and hashed bytewise, padding included)
  key.device = stream->device;
  key.generation = context_generation(stream->device);
  key.dtype = d, key.out_dtype = od;
  key.compute = compute_type(d);
  key.m = L.m, key.n = L.n, key.k = L.k, key.batch = L.batch;
  const BlasMatrix* matrices[3] = {&L.first, &L.second, &L.out};
  for (int i = 0; i < 3; ++i) {
    const BlasMatrix& x = *matrices[i];
    const std::int64_t row[5] = {x.transpose, x.rows, x.cols, x.ld, x.batch_stride};
    std::copy(row, row + 5, key.layouts[i]);
  }
  const ArrayBase* bias = epilogue.bias;
  const ArrayBase* residual = epilogue.residual;
  key.align[0] = alignment(b->data_ptr()), key.align[1] = alignment(a->data_ptr());
  key.align[2] = alignment(out.data_ptr());
  key.align[3] = residual ? alignment(residual->data_ptr()) : key.align[2];
  key.activation = epilogue.activation;
  key.bias = bias != nullptr, key.residual = residual != nullptr;
  if (bias && (bias->dtype() != od || bias->size() != L.n || !bias->is_contiguous() || bias->data_ptr() % 16 != 0))
    throw Error("internal: a product's bias is a 16-byte aligned vector of its last extent and dtype");
  if (residual && (residual->dtype() != od || !(residual->shape() == out.shape()) || !residual->is_contiguous()))
    throw Error("internal: a product's residual is a C-ordered array of its shape and dtype");
  BlasPlan& plan = plan_for(key, L);
  if (!plan.found && (epilogue.any() || widened)) return false;  // the caller runs the epilogue itself
  if (!plan.found)
    throw BlasError(fmt::format("cuBLASLt has no algorithm for a {} product of ({}, {}) by ({}, {}) ({} batches)",
                                dtype_name(d), L.m, L.k, L.k, L.n, L.batch));
  std::unique_lock<std::mutex> bias_lock(plan.bias_mutex, std::defer_lock);
  if (bias) {
    bias_lock.lock();
    const void* at = reinterpret_cast<const void*>(static_cast<std::uintptr_t>(bias->data_ptr()));
    cublaslt::check(
        cublaslt::api().cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &at, sizeof at),
        "cublasLtMatmulDescSetAttribute");
  }
  const cublaslt::Api& lt = cublaslt::api();
  const float one_f = 1, zero_f = 0, scale_f = static_cast<float>(scale);
  const double one_d = 1, zero_d = 0;
  const void* alpha = d == DType::float64 ? static_cast<const void*>(&scale) : &scale_f;
  const void* beta =
      d == DType::float64 ? static_cast<const void*>(residual ? &one_d : &zero_d) : (residual ? &one_f : &zero_f);
  const ArrayBase& c = residual ? *residual : out;  // (with beta = 0 cuBLASLt reads no C)
  // One strided-batched call per index of the outer batch axes (none: one call).
  const std::int64_t outer = numel(L.outer_shape);
  in_order(
      {a, b, bias, residual, &out},
      [&](CUstream h, CUdeviceptr workspace) {
        for (std::int64_t i = 0; i < outer; ++i) {
          std::int64_t rest = i, oa = 0, ob = 0, oo = 0;
          for (int ax = L.outer_shape.size() - 1; ax >= 0; --ax) {
            const std::int64_t at = rest % L.outer_shape[ax];
            rest /= L.outer_shape[ax];
            oa += at * L.outer_a[ax], ob += at * L.outer_b[ax], oo += at * L.outer_out[ax];
          }
          auto ptr = [&](const ArrayBase& x, std::int64_t offset) {
            return reinterpret_cast<void*>(static_cast<std::uintptr_t>(x.data_ptr() + offset * itemsize(x.dtype())));
          };
          cublaslt::check(
              lt.cublasLtMatmul(handle_for(stream->device), plan.desc, alpha, ptr(*b, ob), plan.first, ptr(*a, oa),
                                plan.second, beta, ptr(c, oo), plan.out, ptr(out, oo), plan.out, &plan.algo,
                                reinterpret_cast<void*>(static_cast<std::uintptr_t>(workspace)), kBlasWorkspaceBytes,
                                reinterpret_cast<cudaStream_t>(h)),
              "cublasLtMatmul");
        }
        mark_written_by_library(h, out);
      },
      &key, sizeof key, scale);
  return true;
}

std::string describe_matmul(const ArrayBase& a, const ArrayBase& b, DType result) {
  (void)blas_type(result);
  const Shape as = a.shape(), bs = b.shape();
  // An operand of another dtype is cast into a C-ordered copy first.
  const Strides ast = a.dtype() == result ? a.strides() : contiguous_strides(as);
  const Strides bst = b.dtype() == result ? b.strides() : contiguous_strides(bs);
  MatmulLayout L = matmul_layout(as, ast, bs, bst);
  std::string copies;
  if (a.dtype() != result) copies += fmt::format("; a cast to {} first", dtype_name(result));
  if (b.dtype() != result) copies += fmt::format("; b cast to {} first", dtype_name(result));
  if (L.copy_a) copies += "; a copied C-ordered first (no matrix layout describes its strides)";
  if (L.copy_b) copies += "; b copied C-ordered first (no matrix layout describes its strides)";
  if (L.copy_a || L.copy_b)
    L = matmul_layout(as, L.copy_a ? contiguous_strides(as) : ast, bs, L.copy_b ? contiguous_strides(bs) : bst);
  const char* compute = result == DType::float64                                     ? "float64"
                        : result == DType::float32 && mode_flag(Mode::tf32_products) ? "TF32 (float32 accumulate)"
                                                                                    : "float32";
  return fmt::format("matmul {} @ {} -> {} {}: cuBLASLt, (m, n, k) = ({}, {}, {}), {} batch(es) per call, {} call(s), "
                     "a {}, b {}, {} compute{}",
                     to_string(as), to_string(bs), dtype_name(result), to_string(L.out_shape), L.m, L.n, L.k, L.batch,
                     numel(L.outer_shape), L.second.transpose ? "transposed (column-major view)" : "row-major",
                     L.first.transpose ? "transposed (column-major view)" : "row-major", compute, copies);
}

}  // namespace fusion::detail
