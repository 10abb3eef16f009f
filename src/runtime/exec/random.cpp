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
// 2k + 1 share the pair: in a float32 vector the compiler computes it once; in a float64 vector of two it computes
// the double logarithm and sincospi for each (517 us, where the probe's kernel computing them once takes 331 us).
const Uniform32& normal32_function() {
  static const Uniform32 f("random_normal",
                           kParams + philox("(unsigned long long)i >> 2") +
                               "  const unsigned int lo = (i & 2) == 0 ? c0 : c2, hi = (i & 2) == 0 ? c1 : c3;\n"
                               "  const float u1 = ((float)(lo >> 8) + 1.f) * 5.9604644775390625e-8f;  // (0, 1]\n"
                               "  const float u2 = (float)(hi >> 8) * 5.9604644775390625e-8f;\n"
                               "  float s, c;\n"
                               "  sincospif(2.f * u2, &s, &c);\n"
                               "  return sqrtf(-2.f * logf(u1)) * ((i & 1) == 0 ? c : s);\n}");
  return f;
}

const Uniform64& normal64_function() {
  static const Uniform64 f("random_normal64",
                           kParams + philox("(unsigned long long)i >> 1") +
                               "  const unsigned long long a = ((unsigned long long)c1 << 32) | c0, b = ((unsigned "
                               "long long)c3 << 32) | c2;\n"
                               "  const double u1 = ((double)(a >> 11) + 1.0) * 1.1102230246251565e-16;  // (0, 1]\n"
                               "  const double u2 = (double)(b >> 11) * 1.1102230246251565e-16;\n"
                               "  double s, c;\n"
                               "  sincospi(2.0 * u2, &s, &c);\n"
                               "  return sqrt(-2.0 * log(u1)) * ((i & 1) == 0 ? c : s);\n}");
  return f;
}

}  // namespace fusion::random::detail
