# SPDX-License-Identifier: Apache-2.0
"""PyTorch eager and torch.compile on the workloads of fusion-bench-indexing, timed as it times fusion (events
around 10 calls, median of 9), as % of the copy limit measured here the same way (a device-to-device copy of
1 GiB, bytes read + written).
    python3 bench/peers/indexing.py [--quick] [--no-compile] [--joins | --scans | --embedding]
(the joins, the scans or the embedding lookup with its RMSNorm alone)"""
import sys

import torch

from timing import median_ms


def gathers_and_scatters(quick, gen, report, both, embedding_only=False):
    V, D, B = (4096, 4096, 2048) if quick else (32768, 4096, 16384)
    ids = torch.randint(0, V, (B,), device="cuda", generator=gen, dtype=torch.int32)
    if not embedding_only:
        table = torch.full((V, D), 1.5, dtype=torch.float32, device="cuda")
        out = torch.empty((B, D), dtype=torch.float32, device="cuda")
        nbytes = 2.0 * B * D * 4 + B * 4
        report(f"row gather f32 torch.index_select(out=) ({V}x{D}, {B} ids)", nbytes,
               median_ms(lambda: torch.index_select(table, 0, ids, out=out)))
        both("row gather f32 table[ids]", nbytes, lambda t, i: t[i], table, ids)
        del table, out

    tb = torch.full((V, D), 0.5, dtype=torch.bfloat16, device="cuda")
    pos = torch.full((B, D), 0.25, dtype=torch.bfloat16, device="cuda")
    weight = torch.ones((D,), dtype=torch.bfloat16, device="cuda")

    def embed_rms(t, i, p, w):
        x = (t[i] + p).float()
        return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)).to(torch.bfloat16) * w

    both("embedding + RMSNorm bf16", 3.0 * B * D * 2 + B * 4 + D * 2, embed_rms, tb, ids, pos, weight)
    if embedding_only:
        return

    N = T = (1 << 22) if quick else (1 << 26)
    lut = torch.full((T,), 2.0, dtype=torch.float32, device="cuda")
    idx = torch.randint(0, T, (N,), device="cuda", generator=gen, dtype=torch.int32)
    both(f"scalar gather lut[idx] * 3 ({N} from {T}, 32-byte sectors)", 40.0 * N, lambda l, i: l[i] * 3, lut, idx)
    del tb, pos, lut, idx

    n = (1 << 22) if quick else (1 << 26)
    vals = torch.ones((n,), dtype=torch.float32, device="cuda")
    for bins in (1 << 20, 1024):
        ids = torch.randint(0, bins, (n,), device="cuda", generator=gen, dtype=torch.int64)
        hist = torch.zeros((bins,), dtype=torch.float32, device="cuda")
        report(f"index_add of {n} f32 into {bins} bins (int64 ids) torch index_add_", 12.0 * n + 8.0 * bins,
               median_ms(lambda: hist.index_add_(0, ids, vals)))
    noise = torch.rand((n,), dtype=torch.float32, device="cuda", generator=gen)
    for bins in (1 << 20, 1024):
        ids = torch.randint(0, bins, (n,), device="cuda", generator=gen, dtype=torch.int64)
        top = torch.zeros((bins,), dtype=torch.float32, device="cuda")
        report(f"index_max of {n} f32 into {bins} bins (int64 ids) torch index_reduce_ amax", 12.0 * n + 8.0 * bins,
               median_ms(lambda: top.index_reduce_(0, ids, noise, "amax")))
    del vals, ids, hist, noise, top


def scans(quick, both):
    n = (1 << 24) if quick else (1 << 28)
    x = torch.full((n,), 0.5, dtype=torch.float32, device="cuda")
    both(f"cumsum(x * 2) of {n} f32", 8.0 * n, lambda v: torch.cumsum(v * 2, 0), x)
    del x
    r = 2048 if quick else 8192
    m = torch.full((r, r), 0.25, dtype=torch.float32, device="cuda")
    both(f"row-wise cumsum of {r}x{r} f32", 8.0 * r * r, lambda v: torch.cumsum(v, 1), m)
    both(f"column-wise cumsum of {r}x{r} f32 (axis 0)", 8.0 * r * r, lambda v: torch.cumsum(v, 0), m)
    both(f"row-wise logcumsumexp of {r}x{r} f32", 8.0 * r * r, lambda v: torch.logcumsumexp(v, 1), m)


def main():
    quick = "--quick" in sys.argv
    compile_too = "--no-compile" not in sys.argv
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    copy_gbs = 2 * src.numel() * 4 / (median_ms(lambda: dst.copy_(src)) * 1e-3) / 1e9
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}: copy bandwidth {copy_gbs:.1f} GB/s")
    joins_only = "--joins" in sys.argv
    V, D, B = (4096, 4096, 2048) if quick else (32768, 4096, 16384)
    gen = torch.Generator(device="cuda").manual_seed(1)

    def report(name, nbytes, ms):
        gbs = nbytes / (ms * 1e-3) / 1e9
        print(f"{name:<58} {ms * 1e3:9.1f} us {gbs:8.1f} GB/s {100 * gbs / copy_gbs:6.1f}% of limit")

    def both(name, nbytes, fn, *args):
        report(name + " eager", nbytes, median_ms(lambda: fn(*args)))
        if compile_too:
            compiled = torch.compile(fn)
            report(name + " torch.compile", nbytes, median_ms(lambda: compiled(*args)))

    if "--scans" in sys.argv:
        return scans(quick, both)
    if "--embedding" in sys.argv:
        return gathers_and_scatters(quick, gen, report, both, embedding_only=True)
    if not joins_only:
        gathers_and_scatters(quick, gen, report, both)

    n = (1 << 22) if quick else (1 << 26)
    a = torch.full((n,), 1.0, dtype=torch.float32, device="cuda")
    b = torch.full((n,), 2.0, dtype=torch.float32, device="cuda")
    flat = torch.empty((2 * n,), dtype=torch.float32, device="cuda")
    report(f"concatenate(0, a, b) of 2 x {n} f32 torch.cat(out=)", 16.0 * n,
           median_ms(lambda: torch.cat((a, b), 0, out=flat)))
    both(f"stack(0, a, b) of 2 x {n} f32 torch.stack", 16.0 * n, lambda u, v: torch.stack((u, v), 0), a, b)
    del a, b, flat
    r, c = (2048 if quick else 8192), 4096
    x = torch.full((r, c), 0.5, dtype=torch.float32, device="cuda")
    y = torch.full((r, c), 0.25, dtype=torch.float32, device="cuda")
    bias = torch.ones((2 * c,), dtype=torch.float32, device="cuda")
    both(f"concatenate(1, x, y) of 2 x {r}x{c} f32 torch.cat", 16.0 * r * c, lambda u, v: torch.cat((u, v), 1), x, y)
    both("concatenate(1, x * 2, exp(y)) + bias", 16.0 * r * c + 8.0 * c,
         lambda u, v, w: torch.cat((u * 2, torch.exp(v)), 1) + w, x, y, bias)
    eight = [torch.full((r, c // 8), float(k), dtype=torch.float32, device="cuda") for k in range(8)]
    both(f"concatenate of 8 arrays {r}x{c // 8} f32 along axis 1 torch.cat", 8.0 * r * c,
         lambda *p: torch.cat(p, 1), *eight)
    pad_bytes = 4.0 * r * c + 4.0 * (r + 2) * (c + 4)
    both(f"pad of {r}x{c} f32 by (1, 1), (2, 2) F.pad", pad_bytes, lambda u: torch.nn.functional.pad(u, (2, 2, 1, 1)), x)
    both("pad(x * 2) + 1", pad_bytes, lambda u: torch.nn.functional.pad(u * 2, (2, 2, 1, 1)) + 1, x)
    del x, y, bias, eight

    if not joins_only:
        scans(quick, both)

if __name__ == "__main__":
    main()
