// SPDX-License-Identifier: Apache-2.0
// The device functions behind fz::random: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC 2011) written out in each function's body, as fz::function bodies stand alone.
#include "fusion/random.hpp"

#include <string>

namespace fusion::random::detail {

namespace {

/// Statements computing the block c0..c3 = Philox-4x32-10(key `seed`, counter (offset, `block`)).
std::string philox(const char* block) {
  return std::string(
             "  unsigned int k0 = (unsigned int)seed, k1 = (unsigned int)(seed >> 32);\n"
             "  const unsigned long long blk = ") +
         block +
         ";\n"
         "  unsigned int c0 = (unsigned int)offset, c1 = (unsigned int)(offset >> 32), c2 = (unsigned int)blk, c3 = "
         "(unsigned int)(blk >> 32);\n"
         "  #pragma unroll\n"
         "  for (int r = 0; r < 10; ++r) {\n"
         "    if (r > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }\n"
         "    const unsigned int hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;\n"
         "    const unsigned int hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;\n"
         "    c0 = hi1 ^ c1 ^ k0; c1 = lo1; c2 = hi0 ^ c3 ^ k1; c3 = lo0;\n"
         "  }\n";
}

const char* kParams = "(unsigned long long seed, unsigned long long offset, long long i) {\n";
/// Word `w` (0..3, an expression) of the block, and a pair of words as 64 bits.
const char* kWord = "  const unsigned int w = (i & 3) == 0 ? c0 : (i & 3) == 1 ? c1 : (i & 3) == 2 ? c2 : c3;\n";
const char* kPair =
    "  const unsigned int lo = (i & 1) == 0 ? c0 : c2, hi = (i & 1) == 0 ? c1 : c3;\n";

}  // namespace

const Bits& bits_function() {
  static const Bits f("random_bits", kParams + philox("(unsigned long long)i >> 2") + kWord + "  return w;\n}");
  return f;
}

const Uniform32& uniform32_function() {
  static const Uniform32 f("random_uniform", kParams + philox("(unsigned long long)i >> 2") + kWord +
                                                 "  return (float)(w >> 8) * 5.9604644775390625e-8f;  // 2^-24\n}");
  return f;
}

const Uniform64& uniform64_function() {
  static const Uniform64 f("random_uniform64", kParams + philox("(unsigned long long)i >> 1") + kPair +
                                                 "  const unsigned long long b = ((unsigned long long)hi << 32) | lo;\n"
                                                 "  return (double)(b >> 11) * 1.1102230246251565e-16;  // 2^-53\n}");
  return f;
}

// Box-Muller gives two values from one pair of uniforms, r cos(theta) and r sin(theta): both are used (as cuRAND's
// curand_normal4 does), so a float block of four words makes four values and a double block two, for half the
// logarithms and one sincospi per pair (H200, 2^26 float32: 301 -> 168 us; bench/random_probe.cu). Elements 2k and
// 2k + 1 share the pair, and the compiler computes it once for both when the transform is straight-line code (below).
//
// The float32 transform is written for what it knows of its inputs instead of calling logf and sincospif, which
// handle every float (H200, bench/normal_probe.cu, bench/results/random/h200-2026-11-29-normal-probe.txt: 156 ->
// 129 us a 2^26 draw, the same worst error, 2.97 x 2^-24 of the radius): u1 = k 2^-24 with k in [1, 2^24] is
// never subnormal, zero or negative, so its logarithm is a reduction to [2/3, 4/3) and one polynomial; the angle is
// m / 2^24 of a turn, so its quadrant and the remainder t in [-1/8, 1/8] are exact integer arithmetic and sin and
// cos of 2 pi t two short polynomials (fitted with mpmath's chebyfit: 3.1e-9 and 4.7e-11 of the function; every one
// of the 2^24 inputs within 2.2 float ulps for sin/cos and 1.4 for the logarithm, as logf's 1.35). cuRAND's device
// transform, __sincosf (9 x 2^-24), measured 121 us.
std::string normal32_transform() {
  return "  const float u1 = ((float)(lo >> 8) + 1.f) * 5.9604644775390625e-8f;  // (0, 1]\n"
         "  // ln u1: u1 = 2^e (1 + x), x in [-1/3, 1/3), ln(1 + x) = x - x^2/2 + x^3 P(x)\n"
         "  const int ub = __float_as_int(u1), ue = (ub - 0x3f2aaaab) & (int)0xff800000;\n"
         "  const float x = __int_as_float(ub - ue) - 1.f, e = (float)(ue >> 23);\n"
         "  float p = -0.121255807f;\n"
         "  p = fmaf(p, x, 0.134257490f); p = fmaf(p, x, -0.123461902f); p = fmaf(p, x, 0.141183099f);\n"
         "  p = fmaf(p, x, -0.166701407f); p = fmaf(p, x, 0.200037803f); p = fmaf(p, x, -0.249999879f);\n"
         "  p = fmaf(p, x, 0.333333202f); p = fmaf(p, x, -0.5f); p = fmaf(p, x * x, x);\n"
         "  const float ln_u1 = fmaf(e, 0.693145752f, fmaf(e, 1.42860677e-6f, p));  // ln 2 in two parts\n"
         "  const float r = sqrtf(-2.f * ln_u1);\n"
         "  // the angle: m / 2^24 of a turn = q quarter turns + t turns, t in [-1/8, 1/8]\n"
         "  const unsigned int m = hi >> 8, q = (m + (1u << 21)) >> 22;\n"
         "  const float t = (float)(int)(m - (q << 22)) * 5.9604644775390625e-8f, z = t * t;\n"
         "  float ps = -75.4016127f;\n"
         "  ps = fmaf(ps, z, 81.5925429f); ps = fmaf(ps, z, -41.3416626f); ps = fmaf(ps, z, 6.28318529f);\n"
         "  float pc = 59.2201690f;\n"
         "  pc = fmaf(pc, z, -85.4428447f); pc = fmaf(pc, z, 64.9393161f); pc = fmaf(pc, z, -19.7392087f);\n"
         "  const float sin_t = ps * t, cos_t = fmaf(pc, z, 1.f);\n"
         "  // a quarter turn swaps sine and cosine; the signs follow the quadrant\n"
         "  const float s = __int_as_float(__float_as_int(q & 1 ? cos_t : sin_t) ^ (int)((q & 2) << 30));\n"
         "  const float c = __int_as_float(__float_as_int(q & 1 ? sin_t : cos_t) ^ (int)(((q + 1) & 2) << 30));\n";
}

const Uniform32& normal32_function() {
  static const Uniform32 f("random_normal", kParams + philox("(unsigned long long)i >> 2") +
                                                "  const unsigned int lo = (i & 2) == 0 ? c0 : c2, hi = (i & 2) == 0 ? c1 : c3;\n" +
                                                normal32_transform() + "  return r * ((i & 1) == 0 ? c : s);\n}");
  return f;
}

// The float64 transform is written the same way, for the same reason and one more: `log` and `sincospi` in double
// have branches for inputs u1 and u2 never take, and around them the compiler does not see that the two elements of
// a vector of two doubles, 2k and 2k + 1, share their pair: it computed both functions for each (H200, 2^26 float64:
// 517 us, where the probe's kernel computing them once takes 331 us). Straight-line code it computes once. u1 = k
// 2^-53, k in [1, 2^53]: its logarithm is 2 atanh(s), s = x / (2 + x) in [-1/5, 1/7] (x = the mantissa's distance
// from 1 in [-1/3, 1/3)), a series in s^2 to s^22 (its next term below 2^-58); the angle m / 2^53 of a turn splits
// into quarter turns and t in [-1/8, 1/8] exactly, and sin and cos of 2 pi t are their Taylor series to t^17 and
// t^18 (the next terms below 2^-54 of the value). Checked in float64 without fused multiply-adds on 27,000 values of
// u1 and 40,000 angles against mpmath: 2.4 and 1.4 units of 2^-53 (tests/test_random_gpu.cpp checks the device).
std::string normal64_transform() {
  return "  const double u1 = ((double)(lo >> 11) + 1.0) * 1.1102230246251565e-16;  // (0, 1]\n"
         "  // ln u1: u1 = 2^e (1 + x), x in [-1/3, 1/3); ln(1 + x) = 2 atanh(s) = 2s + 2s z P(z), s = x / (2 + x), z = s^2\n"
         "  const long long ub = __double_as_longlong(u1), ue = (ub - 0x3FE5555555555555ll) & (long long)0xFFF0000000000000ull;\n"
         "  const double x = __longlong_as_double(ub - ue) - 1.0, e = (double)(ue >> 52);\n"
         "  const double sx = x / (2.0 + x), zx = sx * sx;\n"
         "  double p = 1.0 / 23;\n"
         "  p = fma(p, zx, 1.0 / 21); p = fma(p, zx, 1.0 / 19); p = fma(p, zx, 1.0 / 17); p = fma(p, zx, 1.0 / 15);\n"
         "  p = fma(p, zx, 1.0 / 13); p = fma(p, zx, 1.0 / 11); p = fma(p, zx, 1.0 / 9); p = fma(p, zx, 1.0 / 7);\n"
         "  p = fma(p, zx, 1.0 / 5); p = fma(p, zx, 1.0 / 3);\n"
         "  const double ln1p = fma(2.0 * sx, zx * p, 2.0 * sx);\n"
         "  // ln 2 in two parts, the first with trailing zeros so that e times it is exact\n"
         "  const double ln_u1 = fma(e, 6.93147180369123816490e-01, fma(e, 1.90821492927058770002e-10, ln1p));\n"
         "  const double r = sqrt(-2.0 * ln_u1);\n"
         "  // the angle: m / 2^53 of a turn = q quarter turns + t turns, t in [-1/8, 1/8]\n"
         "  const unsigned long long m = hi >> 11, q = (m + (1ull << 50)) >> 51;\n"
         "  const double t = (double)(long long)(m - (q << 51)) * 1.1102230246251565e-16, z = t * t;\n"
         "  double ps = 0.10422916220813984;  // (-1)^k (2 pi)^(2k+1) / (2k+1)!, k = 8 .. 0\n"
         "  ps = fma(ps, z, -0.7181223017785006); ps = fma(ps, z, 3.819952584848282); ps = fma(ps, z, -15.09464257682299);\n"
         "  ps = fma(ps, z, 42.058693944897655); ps = fma(ps, z, -76.70585975306139); ps = fma(ps, z, 81.60524927607506);\n"
         "  ps = fma(ps, z, -41.34170224039976); ps = fma(ps, z, 6.283185307179586);\n"
         "  double pc = -0.03638284114254567;  // (-1)^k (2 pi)^(2k) / (2k)!, k = 9 .. 1\n"
         "  pc = fma(pc, z, 0.28200596845579123); pc = fma(pc, z, -1.714390711088672); pc = fma(pc, z, 7.903536371318469);\n"
         "  pc = fma(pc, z, -26.4262567833744); pc = fma(pc, z, 60.24464137187666); pc = fma(pc, z, -85.45681720669373);\n"
         "  pc = fma(pc, z, 64.9393940226683); pc = fma(pc, z, -19.739208802178716);\n"
         "  const double sin_t = ps * t, cos_t = fma(pc, z, 1.0);\n"
         "  // a quarter turn swaps sine and cosine; the signs follow the quadrant\n"
         "  const double s = (q & 2) ? -(q & 1 ? cos_t : sin_t) : (q & 1 ? cos_t : sin_t);\n"
         "  const double c = ((q + 1) & 2) ? -(q & 1 ? sin_t : cos_t) : (q & 1 ? sin_t : cos_t);\n";
}

const Uniform64& normal64_function() {
  static const Uniform64 f("random_normal64",
                           kParams + philox("(unsigned long long)i >> 1") +
                               "  const unsigned long long lo = ((unsigned long long)c1 << 32) | c0, hi = ((unsigned "
                               "long long)c3 << 32) | c2;\n" +
                               normal64_transform() + "  return r * ((i & 1) == 0 ? c : s);\n}");
  return f;
}

}  // namespace fusion::random::detail
