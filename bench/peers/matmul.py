# SPDX-License-Identifier: Apache-2.0
"""torch.matmul on the shapes of fusion-bench-matmul, timed as it times fusion (events around 10-50 calls,
median of 7 runs): TFLOPS beside fusion's, in the same device session; then the epilogue expressions and
the MLP layer of fusion-bench-matmul, eager and through torch.compile.
    python3 bench/peers/matmul.py [--no-compile]"""
import sys

import torch
import torch.nn.functional as F

from timing import median_ms

CASES = [("8192^3", 8192, 8192, 8192, torch.bfloat16, False),
         ("8192x14336x4096 (MLP up)", 8192, 14336, 4096, torch.bfloat16, False),
         ("8192x4096x14336 (MLP down)", 8192, 4096, 14336, torch.bfloat16, False),
         ("8192^3", 8192, 8192, 8192, torch.float16, False),
         ("8192^3 TF32", 8192, 8192, 8192, torch.float32, True),
         ("4096^3", 4096, 4096, 4096, torch.float32, False),
         ("1024^3", 1024, 1024, 1024, torch.bfloat16, False),
         ("256x256x256", 256, 256, 256, torch.bfloat16, False)]


def main():
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: torch.matmul (out=), eager")
    print(f"{'product (m, n, k)':<28} {'dtype':>9} {'torch ms':>9} {'TFLOPS':>8}")
    for name, m, n, k, dtype, tf32 in CASES:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.full((m, k), 0.01, dtype=dtype, device="cuda")
        b = torch.full((k, n), 0.02, dtype=dtype, device="cuda")
        out = torch.empty((m, n), dtype=dtype, device="cuda")
        calls = 10 if m * n * k > 2 ** 36 else 50
        for _ in range(3):
            torch.matmul(a, b, out=out)
        ms = median_ms(lambda: torch.matmul(a, b, out=out), calls, runs=7, warmup=0)
        print(f"{name:<28} {str(dtype).replace('torch.', ''):>9} {ms:9.3f} {2 * m * n * k / ms / 1e9:8.1f}")
    torch.backends.cuda.matmul.allow_tf32 = False
    epilogues("--no-compile" not in sys.argv)


def epilogues(compile_too):
    """The expressions fusion-bench-matmul times around an 8192^3 bfloat16 product, and the MLP layer."""
    bf = dict(dtype=torch.bfloat16, device="cuda")
    n = 8192
    a, b = torch.full((n, n), 0.01, **bf), torch.full((n, n), 0.02, **bf)
    bias, residual = torch.full((n,), 0.5, **bf), torch.full((n, n), 1.0, **bf)
    flop = 2 * n ** 3
    exprs = [("a @ b", lambda: a @ b),
             ("gelu_tanh(a @ b + bias)", lambda: F.gelu(a @ b + bias, approximate="tanh")),
             ("relu(a @ b + bias)", lambda: torch.relu(a @ b + bias)),
             ("a @ b + bias + residual", lambda: a @ b + bias + residual),
             ("relu(a @ b + bias) * 0.5 + residual", lambda: torch.relu(a @ b + bias) * 0.5 + residual)]
    B, D, H = 8192, 4096, 14336
    x = torch.full((B, D), 0.01, **bf)
    w1, w2 = torch.full((D, H), 0.01, **bf), torch.full((H, D), 0.01, **bf)
    b1, b2 = torch.full((H,), 0.1, **bf), torch.full((D,), 0.1, **bf)
    mlp = ("MLP gelu_tanh(x@w1+b1)@w2+b2+x", lambda: F.gelu(x @ w1 + b1, approximate="tanh") @ w2 + b2 + x)
    print(f"\n{'expression (bfloat16, 8192^3)':<40} {'eager ms':>9} {'TFLOPS':>8} {'compiled ms':>12} {'TFLOPS':>8}")
    for name, fn in exprs + [mlp]:
        f = flop if fn is not mlp[1] else 4 * B * D * H
        for _ in range(3):
            fn()
        eager = median_ms(fn, 10 if fn is not mlp[1] else 5, runs=7, warmup=0)
        line = f"{name:<40} {eager:9.3f} {f / eager / 1e9:8.1f}"
        if compile_too:
            compiled = torch.compile(fn)
            for _ in range(3):
                compiled()
            c = median_ms(compiled, 10 if fn is not mlp[1] else 5, runs=7, warmup=0)
            line += f" {c:12.3f} {f / c / 1e9:8.1f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
