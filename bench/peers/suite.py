"""What layers.py and layouts.py share: timing a case in torch eager, torch.compile and jax.jit on the same
GPU as fusion-bench, and printing each system beside fusion as % of the memory limit (the least bytes, each
input read once and each output written once, over the time, against the copy bandwidth fusion-bench
measured in the same run).

A case is (fusion-bench's name, dtype, function of a module adapter and the arrays, the arrays' shapes,
the least bytes or None to take fusion-bench's own figure). GPU time as in peers.py: CUDA events around 10
calls for PyTorch, wall time of 10 calls and one block_until_ready for JAX; medians of 20.
"""
import argparse, json, re, statistics, sys, time

BATCH = 10


def run_torch(module, compiled):
    import torch
    M = module()
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


def run_jax(module):
    import jax, jax.numpy as jnp
    M = module()
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


def main(cases, torch_module, jax_module, name_width=28):
    ap = argparse.ArgumentParser()
    ap.add_argument("--fusion-json", required=True)
    ap.add_argument("--out")
    ap.add_argument("--only", help="a regular expression: the cases whose 'name dtype' it matches")
    a = ap.parse_args()
    if a.only:
        cases = [c for c in cases if re.search(a.only, f"{c[0]} {c[1]}")]
    fusion = json.load(open(a.fusion_json))
    copy = fusion["copy_gbs"]
    ours = {(r["expression"], r["dtype"]): r for r in fusion["rows"]}
    systems = {"torch eager": lambda: run_torch(torch_module, False), "torch.compile": lambda: run_torch(torch_module, True),
               "jax.jit": lambda: run_jax(jax_module)}
    results = []
    print(f"% of the memory limit (least bytes / time / {copy:.0f} GB/s copy), GPU us in parentheses")
    print(f"{'expression':<{name_width}} {'dtype':>9} {'fusion':>15}" + "".join(f" {s:>15}" for s in systems))
    runners = {}
    for name, dtype, fn, shapes, least in cases:
        f = ours.get((name, dtype))
        least = least or (f and f.get("min_bytes"))
        row = {"expression": name, "dtype": dtype, "least_bytes": least}
        cells = []
        if f and least:
            row["fusion_us"] = f["fused_us"]
            cells.append(f"{100 * least / (f['fused_us'] * 1e3) / copy:6.1f}% ({f['fused_us']:6.1f})")
        else:
            cells.append(f"{'n/a':>15}")
        for s, make in systems.items():
            try:
                runners.setdefault(s, make())
                us = runners[s](fn, dtype, shapes)
                row[s] = us
                cells.append(f"{100 * least / (us * 1e3) / copy:6.1f}% ({us:6.1f})" if least else f"{us:8.1f} us")
            except Exception as e:  # a system that cannot run a case is reported, not fatal
                print(f"  {s}: {name} {dtype}: {type(e).__name__}: {e}", file=sys.stderr)
                cells.append(f"{'failed':>15}")
        print(f"{name:<{name_width}} {dtype:>9} " + " ".join(cells), flush=True)
        results.append(row)
    if a.out:
        json.dump({"copy_gbs": copy, "rows": results}, open(a.out, "w"), indent=1)
