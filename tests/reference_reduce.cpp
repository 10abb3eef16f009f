// SPDX-License-Identifier: Apache-2.0
#include "reference_reduce.hpp"

#include <cmath>
#include <limits>

namespace test {

using fusion::DType;
using fusion::ir::Op;

Reduced reduce(Op op, DType in, DType result, const std::vector<Scalar>& values, const fusion::Shape& shape,
               unsigned mask, double ddof) {
  const int rank = shape.size();
  std::vector<std::int64_t> kept, reduced;
  for (int d = 0; d < rank; ++d) ((mask >> d) & 1 ? reduced : kept).push_back(d);
  const fusion::Strides st = fusion::contiguous_strides(shape);
  auto extent = [&](const std::vector<std::int64_t>& dims) {
    std::int64_t n = 1;
    for (auto d : dims) n *= shape[static_cast<int>(d)];
    return n;
  };
  const std::int64_t n_out = extent(kept), n_red = extent(reduced);
  // The flat offset of the multi-index `i` (C order) over `dims`.
  auto offset = [&](std::int64_t i, const std::vector<std::int64_t>& dims) {
    std::int64_t off = 0;
    for (std::size_t k = dims.size(); k-- > 0;) {
      const int d = static_cast<int>(dims[k]);
      off += (i % shape[d]) * st[d];
      i /= shape[d];
    }
    return off;
  };
  const bool fl = fusion::is_floating(in);
  const bool uns = fusion::is_unsigned_int(in);
  Reduced out;
  out.count = n_red;
  for (std::int64_t o = 0; o < n_out; ++o) {
    const std::int64_t base = offset(o, kept);
    // Sums in long double: a float64 sum of 300,000 terms of a few distinct values rounds the same way each time
    // and drifted by 1e-12 of a variance (fuzz case 31000098 with --long-rows), more than the GPU's tree did.
    long double fsum = 0;
    double fprod = 1, mag = 0;
    std::uint64_t isum = 0, iprod = 1;
    bool any = false, all = true, have = false;
    Scalar best;
    std::int64_t best_i = 0;
    for (std::int64_t r = 0; r < n_red; ++r) {
      const Scalar x = values[static_cast<std::size_t>(base + offset(r, reduced))];
      const double xf =
          fl ? x.f : (uns ? static_cast<double>(static_cast<std::uint64_t>(x.i)) : static_cast<double>(x.i));
      fsum += xf;
      fprod *= xf;
      mag += std::abs(xf);
      isum += static_cast<std::uint64_t>(x.i);
      iprod *= static_cast<std::uint64_t>(x.i);
      any = any || xf != 0;
      all = all && xf != 0;
      const bool nan = fl && std::isnan(x.f);
      auto less = [&](const Scalar& a, const Scalar& b) {
        if (fl) return a.f < b.f;
        return uns ? static_cast<std::uint64_t>(a.i) < static_cast<std::uint64_t>(b.i) : a.i < b.i;
      };
      const bool best_nan = fl && have && std::isnan(best.f);
      bool take = !have;
      switch (op) {
        case Op::min: case Op::argmin: take = take || (!best_nan && (nan || less(x, best))); break;
        case Op::max: case Op::argmax: take = take || (!best_nan && (nan || less(best, x))); break;
        case Op::nanmin: take = take || (!nan && (best_nan || less(x, best))); break;
        case Op::nanmax: take = take || (!nan && (best_nan || less(best, x))); break;
        default: break;
      }
      if (take) best = x, best_i = r;
      have = true;
    }
    Scalar v;
    switch (op) {
      case Op::sum:
        fusion::is_floating(result) ? void(v.f = static_cast<double>(fsum)) : void(v.i = static_cast<std::int64_t>(isum));
        break;
      case Op::prod:
        fusion::is_floating(result) ? void(v.f = fprod) : void(v.i = static_cast<std::int64_t>(iprod));
        break;
      case Op::mean: v.f = static_cast<double>(fsum / (static_cast<long double>(n_red) - ddof)); break;
      case Op::var: {  // two passes in float64; the magnitude bounds float rounding of the deviations
        const double m = static_cast<double>(fsum / static_cast<long double>(n_red));
        long double m2 = 0;
        mag = 0;
        for (std::int64_t r = 0; r < n_red; ++r) {
          const Scalar x = values[static_cast<std::size_t>(base + offset(r, reduced))];
          const double xf =
              fl ? x.f : (uns ? static_cast<double>(static_cast<std::uint64_t>(x.i)) : static_cast<double>(x.i));
          m2 += static_cast<long double>(xf - m) * (xf - m);
          mag += (xf - m) * (xf - m) + 2 * std::abs(xf - m) * (std::abs(xf) + std::abs(m));
        }
        v.f = static_cast<double>(m2 / (static_cast<long double>(n_red) - ddof));
        break;
      }
      case Op::any: v.i = any; break;
      case Op::all: v.i = all; break;
      case Op::argmin: case Op::argmax: v.i = best_i; break;
      default: v = best; break;  // min, max, nanmin, nanmax
    }
    out.values.push_back(normalize(v, result));
    out.magnitude.push_back(mag);
  }
  return out;
}

}  // namespace test
