#!/usr/bin/env python3
"""The layers suite of fusion-bench (softmax, log-softmax, layer norm, RMSNorm, var, a tie of two row
sums, batch norm at 2^26 elements) through torch eager, torch.compile and jax.jit on the same GPU, in
the same run, printed beside fusion's figures as % of the memory limit: the least bytes (each input read
once, each output written once) over the time, against the copy bandwidth fusion-bench measured.

    python3 bench/peers/layers.py --fusion-json layers.json [--out layers-peers.json]

GPU time as in peers.py: CUDA events around 10 calls for PyTorch, wall time of 10 calls and one
block_until_ready for JAX; medians of 20.
"""
import argparse, json, statistics, sys, time

BATCH = 10
N = 1 << 26
ROWS = [128, 1024, 4096, 16384, 65536]


def cases():
    """(fusion-bench's name, dtype, function of module adapter m and arrays, arrays' shapes, least bytes)."""
    out = []
    for d in ROWS:
        r = N // d
        at = f" D={d}"
        out.append(("softmax" + at, "float32", lambda m, x: m.softmax(x), [(r, d)], 8 * N))
        out.append(("log_softmax" + at, "float32", lambda m, x: m.log_softmax(x), [(r, d)], 8 * N))
        out.append(("layer_norm" + at, "float32", lambda m, x, w, b: m.layer_norm(x, w, b), [(r, d), (d,), (d,)], 8 * N + 8 * d))
        out.append(("rms_norm" + at, "float32", lambda m, x, w: m.rms_norm(x, w), [(r, d), (d,)], 8 * N + 4 * d))
        out.append(("rms_norm" + at, "bfloat16", lambda m, x, w: m.rms_norm(x, w), [(r, d), (d,)], 4 * N + 2 * d))
        out.append(("var" + at, "float32", lambda m, x: m.var(x), [(r, d)], 4 * N + 4 * r))
        out.append(("tie(sum,sum sq)" + at, "float32", lambda m, x: m.sums(x), [(r, d)], 4 * N + 8 * r))
    out.append(("var(x)", "float32", lambda m, x: m.var_all(x), [(N,)], 4 * N + 4))
    out.append(("tie(sum,sum sq)(x)", "float32", lambda m, x: m.sums_all(x), [(N,)], 4 * N + 8))
    bn = 8 * 64 * 112 * 112
    out.append(("batch_norm (8,64,112,112)", "float32", lambda m, x, g, b: m.batch_norm(x, g, b),
                [(8, 64, 112, 112), (1, 64, 1, 1), (1, 64, 1, 1)], 8 * bn + 512))
    return out


def torch_module():
    import torch
    class M:
        @staticmethod
        def softmax(x): return torch.exp(x - x.amax(-1, keepdim=True)) / torch.exp(x - x.amax(-1, keepdim=True)).sum(-1, keepdim=True)
        @staticmethod
        def log_softmax(x): return x - x.amax(-1, keepdim=True) - torch.log(torch.exp(x - x.amax(-1, keepdim=True)).sum(-1, keepdim=True))
        @staticmethod
        def layer_norm(x, w, b):
            return (x - x.mean(-1, keepdim=True)) * torch.rsqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5) * w + b
        @staticmethod
        def rms_norm(x, w):
            xf = x.float()
            return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
        @staticmethod
        def var(x): return x.var(-1, unbiased=False)
        @staticmethod
        def sums(x): return x.sum(-1), (x * x).sum(-1)
        @staticmethod
        def var_all(x): return x.var(unbiased=False)
        @staticmethod
        def sums_all(x): return x.sum(), (x * x).sum()
        @staticmethod
        def batch_norm(x, g, b):
            return (x - x.mean((0, 2, 3), keepdim=True)) * torch.rsqrt(x.var((0, 2, 3), keepdim=True, unbiased=False) + 1e-5) * g + b
    return M


def jax_module():
    import jax.numpy as jnp
    class M:
        @staticmethod
        def softmax(x): return jnp.exp(x - x.max(-1, keepdims=True)) / jnp.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)
        @staticmethod
        def log_softmax(x): return x - x.max(-1, keepdims=True) - jnp.log(jnp.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True))
        @staticmethod
        def layer_norm(x, w, b): return (x - x.mean(-1, keepdims=True)) / jnp.sqrt(x.var(-1, keepdims=True) + 1e-5) * w + b
        @staticmethod
        def rms_norm(x, w):
            xf = x.astype(jnp.float32)
            return (xf / jnp.sqrt((xf * xf).mean(-1, keepdims=True) + 1e-6) * w.astype(jnp.float32)).astype(x.dtype)
        @staticmethod
        def var(x): return x.var(-1)
        @staticmethod
        def sums(x): return x.sum(-1), (x * x).sum(-1)
        @staticmethod
        def var_all(x): return x.var()
        @staticmethod
        def sums_all(x): return x.sum(), (x * x).sum()
        @staticmethod
        def batch_norm(x, g, b): return (x - x.mean((0, 2, 3), keepdims=True)) / jnp.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5) * g + b
    return M


def run_torch(compiled):
    import torch
    M = torch_module()
    def run(fn, dtype, shapes):
        g = torch.Generator(device="cuda").manual_seed(1)
        args = [(torch.rand(s, device="cuda", generator=g) * 4 - 2).to(getattr(torch, dtype)) for s in shapes]
        f = (lambda *a: fn(M, *a))
        if compiled:
            # Every case's lambda shares one code object: without a reset, dynamo recompiles it per case
            # and falls back to eager after its cache limit (8), which once made torch.compile look like eager.
            torch._dynamo.reset()
            f = torch.compile(f, dynamic=False)
        for _ in range(3):
            f(*args)
        torch.cuda.synchronize()
        times = []
        for _ in range(20):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(BATCH):
                f(*args)
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e3 / BATCH)
        return statistics.median(times)
    return run


def run_jax():
    import jax, jax.numpy as jnp
    M = jax_module()
    def run(fn, dtype, shapes):
        keys = jax.random.split(jax.random.PRNGKey(1), len(shapes))
        args = [jax.random.uniform(k, s, minval=-2, maxval=2).astype(getattr(jnp, dtype)) for k, s in zip(keys, shapes)]
        f = jax.jit(lambda *a: fn(M, *a))
        jax.block_until_ready(f(*args))
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            for _ in range(BATCH):
                r = f(*args)
            jax.block_until_ready(r)
            times.append((time.perf_counter() - t0) * 1e6 / BATCH)
        return statistics.median(times)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fusion-json", required=True)
    ap.add_argument("--out")
    a = ap.parse_args()
    fusion = json.load(open(a.fusion_json))
    copy = fusion["copy_gbs"]
    ours = {(r["expression"], r["dtype"]): r for r in fusion["rows"]}
    systems = {"torch eager": lambda: run_torch(False), "torch.compile": lambda: run_torch(True), "jax.jit": run_jax}
    results = []
    header = f"{'expression':<28} {'dtype':>9} {'fusion':>15}" + "".join(f" {s:>15}" for s in systems)
    print(f"% of the memory limit (least bytes / time / {copy:.0f} GB/s copy), GPU us in parentheses")
    print(header)
    runners = {}
    for name, dtype, fn, shapes, least in cases():
        row = {"expression": name, "dtype": dtype, "least_bytes": least}
        cells = []
        f = ours.get((name, dtype))
        if f:
            row["fusion_us"] = f["fused_us"]
            cells.append(f"{100 * least / (f['fused_us'] * 1e3) / copy:6.1f}% ({f['fused_us']:6.1f})")
        else:
            cells.append(f"{'n/a':>15}")
        for s, make in systems.items():
            try:
                runners.setdefault(s, make())
                us = runners[s](fn, dtype, shapes)
                row[s] = us
                cells.append(f"{100 * least / (us * 1e3) / copy:6.1f}% ({us:6.1f})")
            except Exception as e:  # a system that cannot run a case is reported, not fatal
                print(f"  {s}: {name} {dtype}: {type(e).__name__}: {e}", file=sys.stderr)
                cells.append(f"{'failed':>15}")
        print(f"{name:<28} {dtype:>9} " + " ".join(cells), flush=True)
        results.append(row)
    if a.out:
        json.dump({"copy_gbs": copy, "rows": results}, open(a.out, "w"), indent=1)


if __name__ == "__main__":
    main()
