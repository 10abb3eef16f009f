#!/usr/bin/env python3
"""The layouts suite of fusion-bench (row, column and scalar broadcasts, an outer product, transposed
operands, a strided slice, column and middle-axis sums; float32 at 2^24 and 2^26 elements, the broadcasts
in bfloat16 and float16 at 2^26) through torch eager, torch.compile and jax.jit on the same GPU, in the
same run, beside fusion's figures as % of the memory limit. The least bytes of each case are fusion-bench's.

    python3 bench/peers/layouts.py --fusion-json layouts.json [--out layouts-peers.json]

Timing and the table: suite.py.
"""
import suite


def cases():
    """(fusion-bench's name, dtype, function of module adapter m and arrays, arrays' shapes, least bytes)."""
    out = []
    def broadcasts(s, dtype):
        sq, row, col = (s, s), (s,), (s, 1)
        at = f" {s}^2"
        out.append(("m+row" + at, dtype, lambda m, a, r: a + r, [sq, row], None))
        out.append(("m*col" + at, dtype, lambda m, a, c: a * c, [sq, col], None))
        out.append(("max(m+row*col,0)" + at, dtype, lambda m, a, r, c: m.relu(a + r * c), [sq, row, col], None))
        out.append(("m*2.5+1" + at, dtype, lambda m, a: a * 2.5 + 1, [sq], None))
        out.append(("outer(col,row)" + at, dtype, lambda m, c, r: c * r, [col, row], None))
    for s in (4096, 8192):
        broadcasts(s, "float32")
        at, sq = f" {s}^2", (s, s)
        out.append(("m+m2.T" + at, "float32", lambda m, a, b: a + b.T, [sq, sq], None))
        out.append(("m.T*m2" + at, "float32", lambda m, a, b: a.T * b, [sq, sq], None))
        out.append(("m[:, ::2]+1" + at, "float32", lambda m, a: a[:, ::2] + 1, [sq], None))
        half = (s, s // 2)
        out.append(("rotary m[:, ::2]*c-m[:, 1::2]*s" + at, "float32", lambda m, a, c, n: a[:, ::2] * c - a[:, 1::2] * n,
                    [sq, half, half], None))
        out.append(("rotary qkv[:, n:2n] pairs" + at, "float32",
                    lambda m, a, c, n: a[:, a.shape[0]:2 * a.shape[0]][:, ::2] * c - a[:, a.shape[0]:2 * a.shape[0]][:, 1::2] * n,
                    [(s, 3 * s), half, half], None))
        out.append(("sum(m,0)" + at, "float32", lambda m, a: a.sum(0), [sq], None))
        out.append(("sum(t,1) middle axis" + at, "float32", lambda m, a: a.reshape(a.shape[0] // 16, 16, a.shape[1]).sum(1), [sq], None))
    for dtype in ("bfloat16", "float16"):
        broadcasts(8192, dtype)
    return out


def torch_module():
    import torch
    class M:
        @staticmethod
        def relu(x): return torch.clamp_min(x, 0)
    return M


def jax_module():
    import jax.numpy as jnp
    class M:
        @staticmethod
        def relu(x): return jnp.maximum(x, 0)
    return M


if __name__ == "__main__":
    suite.main(cases(), torch_module, jax_module)
