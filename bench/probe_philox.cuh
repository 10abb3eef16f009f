// SPDX-License-Identifier: Apache-2.0
// Philox-4x32-10 as src/runtime/exec/random.cpp writes it (the hi and lo words of each product from mul.hi and mul.lo),
// for the plain-CUDA probes of fz::random (random_probe.cu, normal_probe.cu).
#pragma once

struct Block {
  unsigned c0, c1, c2, c3;
};

/// Block `blk` of the stream with key `seed` and counter (offset, blk).
__device__ __forceinline__ Block philox_hilo(unsigned long long seed, unsigned long long offset,
                                             unsigned long long blk) {
  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
  unsigned c0 = (unsigned)offset, c1 = (unsigned)(offset >> 32), c2 = (unsigned)blk, c3 = (unsigned)(blk >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    if (r > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    const unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
  }
  return {c0, c1, c2, c3};
}
