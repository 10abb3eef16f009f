// SPDX-License-Identifier: Apache-2.0
// User kernels -> CUDA source. The user's code is pasted between fusion's loop and addressing: each
// parameter becomes a variable of its name (inputs `const`, outputs references, raw arrays indexable),
// each bound placeholder a typedef, and the whole text is hashed into the kernel's name.
#include <fmt/format.h>

#include <cctype>

#include "codegen/kernel_frame.hpp"
#include "codegen/emit_user.hpp"
#include "codegen/spell.hpp"
#include "codegen/reduce_skeleton.hpp"
#include "fusion/error.hpp"

namespace fusion::codegen {
namespace {

/// `_ind.size()` (elementwise), `_in_ind.size()` and `_out_ind.size()` (reductions), as in CuPy.
constexpr const char* kIndexSize =
    "struct FzInd { long long n; __device__ __forceinline__ long long size() const { return n; } };";

std::uint64_t spec_hash(const UserKernelSpec& s, const UserVariant& v) {
  StableHasher h;
  h.add_byte(s.reduction ? 0x52 : 0x45);
  for (const std::string* t : {&s.name, &s.operation, &s.map_expr, &s.reduce_expr, &s.post_map_expr, &s.identity,
                               &s.preamble, &s.reduce_type, &s.loop_prep, &s.after_loop})
    h.add(*t);
  for (const auto* list : {&s.in, &s.out}) {
    h.add_u32(static_cast<std::uint32_t>(list->size()));
    for (const UserParam& p : *list) {
      h.add(p.name);
      h.add(p.type);
      h.add_byte(p.raw);
    }
  }
  for (const std::string& o : s.options) h.add(o);
  for (DType d : v.dtypes) h.add_byte(static_cast<std::uint8_t>(d));
  for (UserAccess a : v.access) h.add_byte(static_cast<std::uint8_t>(a));
  for (std::uint8_t r : v.raw_rank) h.add_byte(r);
  for (bool f : v.fresh) h.add_byte(f);
  h.add_byte(v.rank);
  h.add_byte(v.index64);
  if (s.reduction) v.reduce.hash_into(h, v.reduce.n_params);
  if (v.vector_width > 1) {  // appended, so scalar kernels keep their hashes
    h.add_byte(0x56);
    h.add_byte(v.vector_width);
  }
  return h.digest();
}

std::string signature(const UserKernelSpec& s) {
  auto list = [](const std::vector<UserParam>& ps) {
    std::string r;
    for (const UserParam& p : ps)
      r += fmt::format("{}{}{} {}", r.empty() ? "" : ", ", p.raw ? "raw " : "", p.type, p.name);
    return r;
  };
  return fmt::format("{} '{}' ({} -> {})", s.reduction ? "ReductionKernel" : "ElementwiseKernel", s.name, list(s.in),
                     list(s.out));
}

/// Helpers for 16-bit values, the typedefs of the bound placeholders, then the user's preamble.
void write_user_prelude(SourceWriter& w, const UserKernelSpec& s, const UserVariant& v) {
  SpellContext ctx;
  for (DType d : v.dtypes) {
    need_conversions(ctx, d);
  }
  if (s.reduction) {
    need_conversions(ctx, v.reduce.out_dtype);
  }
  write_prelude(w, ctx, 0);
  for (const auto& [name, d] : v.types) w.line("typedef {} {};", compute_type(d), name);
  if (!v.types.empty()) w.blank();
  if (!s.preamble.empty()) w.text(s.preamble).blank();
}

/// The name of a 16-bit float's raw element struct after "Fz": its dtype tag in capitals (F16, BF16).
std::string raw_tag(DType d) {
  std::string tag(dtype_tag(d));
  for (char& ch : tag) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return tag;
}

/// The types of raw parameters: indexed in C order of the array's own shape; 16-bit elements read as
/// float and round on assignment.
void write_raw_helpers(SourceWriter& w, const UserVariant& v) {
  w.line("template <class T> __device__ __forceinline__ T& fz_elem(T* p) {{ return *p; }}");
  for (const DTypeInfo& row : kDTypes) {  // a struct of raw bits per 16-bit float dtype used: FzF16, FzBF16
    const DType d = row.dtype;
    if (!is_16bit_float(d)) continue;
    const std::string tag = raw_tag(d);
    const char* to = dtype_info(d).to_float;
    const char* from = dtype_info(d).from_float;
    bool used = false;
    for (std::size_t p = 0; p < v.dtypes.size(); ++p)
      used = used || (v.dtypes[p] == d &&
                      (v.access[p] == UserAccess::raw_contiguous || v.access[p] == UserAccess::raw_strided));
    if (!used) continue;
    w.line("struct Fz{} {{ unsigned short bits; }};", tag);
    w.line("struct Fz{}Ref {{", tag);
    w.line("  Fz{}* p;", tag);
    w.line("  __device__ __forceinline__ operator float() const {{ return {}(p->bits); }}", to);
    w.line("  __device__ __forceinline__ Fz{0}Ref& operator=(float v) {{ p->bits = {1}(v); return *this; }}", tag,
           from);
    w.line("  __device__ __forceinline__ Fz{0}Ref& operator+=(float v) {{ return *this = float(*this) + v; }}", tag);
    w.line("}};");
    w.line("__device__ __forceinline__ Fz{0}Ref fz_elem(Fz{0}* p) {{ return Fz{0}Ref{{p}}; }}", tag);
  }
  w.line("template <class T> struct FzRaw {{");
  w.line("  T* p; long long n;");
  w.line(
      "  __device__ __forceinline__ decltype(fz_elem((T*)0)) operator[](long long k) const {{ return fz_elem(p + k); "
      "}}");
  w.line("  __device__ __forceinline__ long long size() const {{ return n; }}");
  w.line("}};");
  w.line("template <class T, int R> struct FzRawN {{");
  w.line("  T* p; long long n; long long shape[R]; long long strides[R];");
  w.line("  __device__ __forceinline__ decltype(fz_elem((T*)0)) operator[](long long k) const {{");
  w.line("    long long o = 0;");
  w.line("    for (int d = R - 1; d > 0; --d) {{ o += (k % shape[d]) * strides[d]; k /= shape[d]; }}");
  w.line("    return fz_elem(p + o + k * strides[0]);");
  w.line("  }}");
  w.line("  __device__ __forceinline__ long long size() const {{ return n; }}");
  w.line("}};");
}

}  // namespace

/// One element of an ElementwiseKernel: its parameters bound by name (inputs as values, outputs as
/// references; a 16-bit output computes in float and rounds once on store), then the user's code.
/// `at(p)` is where parameter p's element lives (a pointer offset, or a lane of a vector).
template <class At> void write_user_element(SourceWriter& w, const UserKernelSpec& s, const UserVariant& v, At&& at) {
  const std::size_t n_in = s.in.size(), n = n_in + s.out.size();
  std::vector<std::string> stores;
  for (std::size_t p = 0; p < n; ++p) {
    const UserAccess a = v.access[p];
    if (a == UserAccess::scalar || a == UserAccess::raw_contiguous || a == UserAccess::raw_strided) continue;
    const std::string& name = p < n_in ? s.in[p].name : s.out[p - n_in].name;
    const DType d = v.dtypes[p];
    const std::string where = at(p);
    if (p < n_in) {
      w.line("const {} {} = {};", compute_type(d), name, load_conversion(d, where));
    } else if (is_16bit_float(d)) {
      w.line("float {} = {};", name, v.fresh[p - n_in] ? "0.f" : load_conversion(d, where));
      stores.push_back(fmt::format("{} = {};", where, store_conversion(DType::float32, d, name)));
    } else {
      w.line("{}& {} = {};", storage_type(d), name, where);
    }
  }
  {
    auto user = w.block("");
    w.text(s.operation + ";");
  }
  for (const auto& st : stores) w.line("{}", st);
}

/// The main loop of a vectorized ElementwiseKernel: each thread takes `V` neighbouring elements with one
/// 16-byte access per contiguous array, runs the user's code on each (inputs as values, outputs as
/// references into the output vectors), then stores the vectors. Outputs the code only writes are not
/// read: their loads are dead and the compiler drops them. The scalar loop after it takes the tail.
void write_user_vectors(SourceWriter& w, const UserKernelSpec& s, const UserVariant& v, const std::string& idx) {
  const int V = v.vector_width;
  const std::size_t n_in = s.in.size(), n = n_in + s.out.size();
  auto param = [&](std::size_t p) -> const UserParam& { return p < n_in ? s.in[p] : s.out[p - n_in]; };
  w.line("// {} elements per step, one 16-byte access per contiguous array; the tail runs one by one below.", V);
  auto loop = w.block(
      "for ({0} _fz_v = ({0})blockIdx.x * blockDim.x + threadIdx.x; _fz_v < ({0})(_fz_n / {1}); _fz_v += _fz_step)",
      idx, V);
  for (std::size_t p = 0; p < n; ++p) {
    const UserParam& u = param(p);
    const DType d = v.dtypes[p];
    const std::string vec = fmt::format("FzVec<{}, {}>", storage_type(d), V);
    if (v.access[p] == UserAccess::contiguous) {
      const bool fresh16 = p >= n_in && v.fresh[p - n_in];
      w.line("{}{} _fz_w_{} = {};", p < n_in ? "const " : "", vec, u.name,
             fresh16 ? "{}" : fmt::format("reinterpret_cast<const {}*>(_fz_p_{})[_fz_v]", vec, u.name));
    }
  }
  {
    w.line("#pragma unroll");
    auto lanes = w.block("for (int _fz_k = 0; _fz_k < {}; ++_fz_k)", V);
    write_user_element(w, s, v, [&](std::size_t p) {
      return v.access[p] == UserAccess::broadcast ? fmt::format("_fz_p_{}[0]", param(p).name)
                                                  : fmt::format("_fz_w_{}.v[_fz_k]", param(p).name);
    });
  }
  for (std::size_t p = n_in; p < n; ++p)
    w.line("reinterpret_cast<FzVec<{0}, {1}>*>(_fz_p_{2})[_fz_v] = _fz_w_{2};", storage_type(v.dtypes[p]), V,
           param(p).name);
}

namespace {

/// What every user kernel starts from: the hash of its spec and variant, the user's name with that hash,
/// the user's compile options; the user's code and preamble may use any device header.
GeneratedKernel user_kernel_frame(const UserKernelSpec& s, const UserVariant& v) {
  GeneratedKernel k;
  k.hash = spec_hash(s, v);
  k.name = fmt::format("{}_{}", s.name, hex16(k.hash));
  k.options = s.options;
  k.full_headers = true;
  return k;
}

}  // namespace

GeneratedKernel emit_user_elementwise(const UserKernelSpec& s, const UserVariant& v) {
  GeneratedKernel k = user_kernel_frame(s, v);
  const std::size_t n_in = s.in.size(), n = n_in + s.out.size();
  auto param = [&](std::size_t p) -> const UserParam& { return p < n_in ? s.in[p] : s.out[p - n_in]; };
  bool raw = false, strided = false;
  for (std::size_t p = 0; p < n; ++p) {
    const bool is_raw = v.access[p] == UserAccess::raw_contiguous || v.access[p] == UserAccess::raw_strided;
    raw = raw || is_raw;
    strided = strided || v.access[p] == UserAccess::strided;
  }
  auto raw_elem = [&](DType d) { return is_16bit_float(d) ? "Fz" + raw_tag(d) : std::string(storage_type(d)); };

  SourceWriter w;
  w.line("// Generated by fusion. {}: {}.", signature(s), v.describe());
  write_user_prelude(w, s, v);
  if (raw) write_raw_helpers(w, v);
  w.line("{}", kIndexSize);
  if (strided) w.line("struct FzDims {{ long long v[{}]; }};", v.rank);
  const int V = v.vector_width;
  if (V > 1) w.line("template <class T, int N> struct alignas(sizeof(T) * N) FzVec {{ T v[N]; }};");
  w.blank();

  const std::string idx = v.index64 ? "long long" : "int";
  // Every index is the parameter's position (inputs, then outputs); dims: 0 the shape, 1 + p strides.
  KernelSignature& sig = k.signature;
  for (std::size_t p = 0; p < n; ++p) {
    const UserParam& u = param(p);
    const DType d = v.dtypes[p];
    const bool out = p >= n_in;
    const auto at = static_cast<std::uint32_t>(p);
    switch (v.access[p]) {
      case UserAccess::scalar:
        sig.add(ArgSource::scalar, at, fmt::format("const {} {}", compute_type(d), u.name));
        break;
      case UserAccess::raw_contiguous:
        sig.add(ArgSource::raw, at, fmt::format("const FzRaw<{}> {}", raw_elem(d), u.name));
        break;
      case UserAccess::raw_strided:
        sig.add(ArgSource::raw, at, fmt::format("const FzRawN<{}, {}> {}", raw_elem(d), v.raw_rank[p], u.name));
        break;
      default:
        sig.add(ArgSource::pointer, at, fmt::format("{}{}* _fz_p_{}", out ? "" : "const ", storage_type(d), u.name));
    }
  }
  sig.add(Count::n, "const long long _fz_n");
  if (strided) {
    sig.add(ArgSource::dims, 0, "const FzDims _fz_shape");
    for (std::size_t p = 0; p < n; ++p)
      if (v.access[p] == UserAccess::strided)
        sig.add(ArgSource::dims, static_cast<std::uint32_t>(1 + p),
                fmt::format("const FzDims _fz_st_{}", param(p).name));
  }
  {
    auto kernel =
        w.block("extern \"C\" __global__ void __launch_bounds__({}) {}({})", kBlockThreads, k.name, sig.list());
    write_wait_for_previous_kernel(w);
    w.line("const FzInd _ind{{_fz_n}};");
    w.line("const {0} _fz_step = ({0})gridDim.x * blockDim.x;", idx);
    if (V > 1) write_user_vectors(w, s, v, idx);
    auto loop =
        w.block("for ({0} _fz_i = {1}({0})blockIdx.x * blockDim.x + threadIdx.x; _fz_i < _fz_n; _fz_i += _fz_step)",
                idx, V > 1 ? fmt::format("_fz_n / {0} * {0} + ", V) : "");
    w.line("const long long i = _fz_i;");
    auto offset = [&](std::size_t p) {
      switch (v.access[p]) {
        case UserAccess::contiguous: return std::string("_fz_i");
        case UserAccess::broadcast: return std::string("0");
        default: return fmt::format("_fz_o_{}", param(p).name);
      }
    };
    if (strided) {
      std::vector<std::string> targets;
      for (std::size_t p = 0; p < n; ++p)
        if (v.access[p] == UserAccess::strided) targets.push_back(param(p).name);
      w.line("{} _fz_rest = _fz_i;", idx);
      for (const auto& t : targets) w.line("{} _fz_o_{} = 0;", idx, t);
      w.line("#pragma unroll");
      {
        auto dims = w.block("for (int _fz_d = {}; _fz_d >= 1; --_fz_d)", v.rank - 1);
        w.line("const {0} _fz_c = _fz_rest % ({0})_fz_shape.v[_fz_d];", idx);
        w.line("_fz_rest /= ({})_fz_shape.v[_fz_d];", idx);
        for (const auto& t : targets) w.line("_fz_o_{0} += _fz_c * ({1})_fz_st_{0}.v[_fz_d];", t, idx);
      }
      for (const auto& t : targets) w.line("_fz_o_{0} += _fz_rest * ({1})_fz_st_{0}.v[0];", t, idx);
    }
    write_user_element(w, s, v, [&](std::size_t p) { return fmt::format("_fz_p_{}[{}]", param(p).name, offset(p)); });
  }
  k.source = w.str();
  return k;
}

GeneratedKernel emit_user_reduction(const UserKernelSpec& s, const UserVariant& v) {
  GeneratedKernel k = user_kernel_frame(s, v);
  const std::size_t n_in = s.in.size();
  TypeBinding b;
  for (const auto& [name, d] : v.types) b.set(name, d);
  const DType rd = b.resolve(s.reduce_type, "reduce_type");
  const std::string acc(compute_type(rd));
  const DType out = v.dtypes[n_in];

  ReduceSkeleton sk;
  sk.kernel_name = k.name;
  sk.acc = acc;
  // CuPy's index sizes, scalar inputs by name, then loop_prep: visible to after_loop and post_map_expr.
  sk.kernel_prep = "const FzInd _in_ind{n_out * n_red}, _out_ind{n_out};\n";
  for (std::size_t p = 0; p < n_in; ++p)
    if (v.access[p] == UserAccess::scalar)
      sk.kernel_prep += fmt::format("const {0} {1} = _fz_s_{1};\n", compute_type(v.dtypes[p]), s.in[p].name);
  if (!s.loop_prep.empty()) sk.kernel_prep += s.loop_prep + ";";
  SourceWriter fn;
  {
    std::vector<std::string> args, bind;
    for (std::size_t p = 0; p < n_in; ++p) {
      const DType d = v.dtypes[p];
      const std::string& name = s.in[p].name;
      if (v.access[p] == UserAccess::scalar) {
        sk.scalar_params.emplace_back(static_cast<std::uint32_t>(p),
                                      fmt::format("const {} _fz_s_{}", compute_type(d), name));
        sk.scalar_args.push_back("_fz_s_" + name);
      } else {
        args.push_back(fmt::format("{} _fz_x{}", compute_type(d), sk.params.size()));
        bind.push_back(fmt::format("const {} {} = _fz_x{};", compute_type(d), name, sk.params.size()));
        sk.params.push_back(d);
      }
    }
    for (std::size_t p = 0; p < n_in; ++p)
      if (v.access[p] == UserAccess::scalar) {
        args.push_back(fmt::format("{} _fz_s{}", compute_type(v.dtypes[p]), p));
        bind.push_back(fmt::format("const {} {} = _fz_s{};", compute_type(v.dtypes[p]), s.in[p].name, p));
      }
    auto f = fn.block("// map_expr: one element as the reduction sees it.\n__device__ __forceinline__ {} fz_expr({})",
                      acc, fmt::join(args, ", "));
    for (const auto& l : bind) fn.line("{}", l);
    fn.line("return ({})({});", acc, s.map_expr);
  }
  fn.line("__device__ __forceinline__ {0} fz_identity() {{ return ({0})({1}); }}", acc, s.identity);
  fn.line("__device__ __forceinline__ {0} fz_lift({0} x, long long) {{ return x; }}", acc);
  fn.line("// reduce_expr: `a` holds earlier elements than `b`.");
  fn.line("__device__ __forceinline__ {0} fz_combine({0} a, {0} b) {{ return ({0})({1}); }}", acc, s.reduce_expr);
  ReduceOpSpelling moves = reduce_op_spelling(ir::Op::sum, rd);  // moving and loading `acc` values
  moves.value = acc;
  write_reduce_helpers(fn, moves);
  const std::string& y = s.out[0].name;
  sk.store = [&, y](const std::string& index) {
    const std::string value_type = is_16bit_float(out) ? "float" : std::string(compute_type(out));
    std::string body = fmt::format("{{ {} {}{{}}; ", value_type, y);
    if (!s.after_loop.empty()) body += s.after_loop + "; ";
    body += s.post_map_expr + "; ";
    body +=
        fmt::format("out[{}] = {}; }}", index, store_conversion(is_16bit_float(out) ? DType::float32 : out, out, y));
    return body;
  };

  SourceWriter w;
  w.line("// Generated by fusion. {}: {}; {}.", signature(s), v.describe(), v.reduce.describe());
  write_user_prelude(w, s, v);
  w.line("{}", kIndexSize);
  sk.signature = &k.signature;
  write_reduce_kernel(w, v.reduce, sk, fn.str());
  k.source = w.str();
  return k;
}

}  // namespace fusion::codegen
