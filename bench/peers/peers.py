#!/usr/bin/env python3
"""fusion's benchmark expressions through its peers, on the same GPU, in the same run as fusion-bench:
CuPy (plain and cupy.fuse), PyTorch eager, torch.compile and jax.jit. Prints one table with every
system side by side: GPU us (median) and % of the copy bandwidth fusion-bench measured, host us per
call at 1,024 elements, and first-call latency in a new process with a cold and with a warm disk cache.

    python3 bench/peers/peers.py --fusion-json bench.json [--out peers.json]

GPU time is taken with CUDA events around a batch of 10 calls for CuPy and PyTorch (so a system's host
launch overhead hides behind queued work, as it does in a real program); JAX has no events, so its
figure is the wall time of 10 calls and one block_until_ready. fusion's column is fusion-bench's (events
around each call: its 4 us dispatch hides behind the kernel at large sizes). Medians of 20. CuPy has no
bfloat16: those cells are n/a.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

EXPRS = ["sin(x)+cos(y)/sqrt(z)", "(x-y)*(x-y)", "softplus", "2.5*x+y", "gelu_tanh", "horner10"]
ARRAYS = {"sin(x)+cos(y)/sqrt(z)": 4, "(x-y)*(x-y)": 3, "softplus": 2, "2.5*x+y": 3, "gelu_tanh": 2, "horner10": 2}


def expression(name, m):
    """The expression as a named function of x, y, z (cupy.fuse names its kernel after it)."""
    f = _expression(name, m)
    f.__name__ = "expr_" + "".join(c if c.isalnum() else "_" for c in name).strip("_")
    return f


def _expression(name, m):
    """The expression as a function of x, y, z for a NumPy-like module adapter `m`."""
    if name == "sin(x)+cos(y)/sqrt(z)":
        return lambda x, y, z: m.sin(x) + m.cos(y) / m.sqrt(z)
    if name == "(x-y)*(x-y)":
        return lambda x, y, z: (x - y) * (x - y)
    if name == "softplus":
        return lambda x, y, z: m.relu(x) + m.log1p(m.exp(-m.abs(x)))
    if name == "2.5*x+y":
        return lambda x, y, z: 2.5 * x + y
    if name == "gelu_tanh":
        return lambda x, y, z: 0.5 * x * (1.0 + m.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
    def horner(x, y, z):
        acc = 0.1 * x + 0.2
        for c in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1):
            acc = acc * x + c
        return acc
    return horner


BATCH = 10  # calls between one event pair: host launch gaps hide behind queued work, as in real use


def median_events(fn, sync, event_pair, repeats=20, warmup=3):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start, end, elapsed = event_pair()
        start()
        for _ in range(BATCH):
            fn()
        end()
        times.append(elapsed() / BATCH)
    return statistics.median(times)


def host_us_per_call(fn, sync, calls=300):
    fn(); sync()
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        sync()
        best.append((t1 - t0) / calls * 1e6)
    return statistics.median(best)


# ---- systems: each returns {"gpu_us": ..., "host_us": ...} for one expression, dtype and size ----------

def cupy_system(fused):
    import cupy as cp, cupyx.profiler
    class M:
        sin, cos, sqrt, log1p, exp, abs, tanh = cp.sin, cp.cos, cp.sqrt, cp.log1p, cp.exp, cp.abs, cp.tanh
        @staticmethod
        def relu(x): return cp.maximum(x, 0)
    def run(name, dtype, n, host):
        if dtype != "float32":
            return None
        rng = cp.random.default_rng(1)
        x, y = rng.uniform(-2, 2, n, dtype=cp.float32), rng.uniform(-2, 2, n, dtype=cp.float32)
        z = rng.uniform(0.5, 2, n, dtype=cp.float32)
        f = expression(name, M)
        if fused:
            f = cp.fuse(f)
        call = lambda: f(x, y, z)
        if host:
            return host_us_per_call(call, cp.cuda.Device().synchronize)
        def events():
            s, e = cp.cuda.Event(), cp.cuda.Event()
            return s.record, e.record, lambda: (e.synchronize(), cp.cuda.get_elapsed_time(s, e) * 1e3)[1]
        return median_events(call, cp.cuda.Device().synchronize, events)
    return run


def torch_system(compiled):
    import torch
    class M:
        sin, cos, sqrt, log1p, exp, abs, tanh = torch.sin, torch.cos, torch.sqrt, torch.log1p, torch.exp, torch.abs, torch.tanh
        @staticmethod
        def relu(x): return torch.clamp_min(x, 0)
    def events():
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        return s.record, e.record, lambda: (e.synchronize(), s.elapsed_time(e) * 1e3)[1]
    def run(name, dtype, n, host):
        dt = getattr(torch, dtype)
        g = torch.Generator(device="cuda").manual_seed(1)
        x = (torch.rand(n, device="cuda", generator=g) * 4 - 2).to(dt)
        y = (torch.rand(n, device="cuda", generator=g) * 4 - 2).to(dt)
        z = (torch.rand(n, device="cuda", generator=g) * 1.5 + 0.5).to(dt)
        f = expression(name, M)
        if compiled:
            f = torch.compile(f, dynamic=False)
        call = lambda: f(x, y, z)
        if host:
            return host_us_per_call(call, torch.cuda.synchronize)
        return median_events(call, torch.cuda.synchronize, events)
    return run


def jax_system():
    import jax, jax.numpy as jnp
    class M:
        sin, cos, sqrt, log1p, exp, abs, tanh = jnp.sin, jnp.cos, jnp.sqrt, jnp.log1p, jnp.exp, jnp.abs, jnp.tanh
        @staticmethod
        def relu(x): return jnp.maximum(x, 0)
    def run(name, dtype, n, host):
        dt = getattr(jnp, dtype)
        k = jax.random.split(jax.random.PRNGKey(1), 3)
        x = jax.random.uniform(k[0], (n,), minval=-2, maxval=2).astype(dt)
        y = jax.random.uniform(k[1], (n,), minval=-2, maxval=2).astype(dt)
        z = jax.random.uniform(k[2], (n,), minval=0.5, maxval=2).astype(dt)
        f = jax.jit(expression(name, M))
        if host:
            out = [None]
            def call(): out[0] = f(x, y, z)
            return host_us_per_call(call, lambda: out[0].block_until_ready())
        f(x, y, z).block_until_ready()
        times = []
        for _ in range(20):
            t0 = time.perf_counter()
            for _ in range(BATCH):
                r = f(x, y, z)
            r.block_until_ready()
            times.append((time.perf_counter() - t0) * 1e6 / BATCH)
        return statistics.median(times)
    return run


SYSTEMS = {
    "cupy": lambda: cupy_system(False),
    "cupy.fuse": lambda: cupy_system(True),
    "torch eager": lambda: torch_system(False),
    "torch.compile": lambda: torch_system(True),
    "jax.jit": jax_system,
}

# ---- first call in a new process, with a cold and then a warm disk cache ------------------------------

FIRST_CALL = r'''
import os, sys, time
system = sys.argv[1]
n = 1 << 20
if system.startswith("cupy"):
    import cupy as cp
    x = cp.ones(n, cp.float32); y = cp.full(n, 2, cp.float32); cp.cuda.Device().synchronize()
    def first_call(a, b): return cp.sin(a) * cp.cos(b) + 0.25
    f = cp.fuse(first_call) if system == "cupy.fuse" else first_call
    sync = cp.cuda.Device().synchronize
elif system.startswith("torch"):
    import torch
    x = torch.ones(n, device="cuda"); y = torch.full((n,), 2.0, device="cuda"); torch.cuda.synchronize()
    f = lambda a, b: torch.sin(a) * torch.cos(b) + 0.25
    if system == "torch.compile": f = torch.compile(f, dynamic=False)
    sync = torch.cuda.synchronize
else:
    import jax, jax.numpy as jnp
    jax.config.update("jax_compilation_cache_dir", os.environ["PEER_CACHE"])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    x = jnp.ones(n, jnp.float32); y = jnp.full(n, 2.0, jnp.float32); x.block_until_ready()
    f = jax.jit(lambda a, b: jnp.sin(a) * jnp.cos(b) + 0.25)
    sync = None
t0 = time.perf_counter()
r = f(x, y)
r.block_until_ready() if sync is None else sync()
print((time.perf_counter() - t0) * 1e3)
'''


def first_call_ms(system, cache):
    env = dict(os.environ, PEER_CACHE=cache, CUPY_CACHE_DIR=cache, TORCHINDUCTOR_CACHE_DIR=cache,
               TRITON_CACHE_DIR=os.path.join(cache, "triton"))
    out = subprocess.run([sys.executable, "-c", FIRST_CALL, system], env=env, capture_output=True, text=True, timeout=300)
    try:
        return float(out.stdout.strip().splitlines()[-1])
    except Exception:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fusion-json", required=True)
    ap.add_argument("--fusion-bench", default="build-gpu/fusion-bench")
    ap.add_argument("--out", default=None)
    ap.add_argument("--log2n", default="10,20,26")  # the sizes of fusion-bench
    args = ap.parse_args()
    fz = json.load(open(args.fusion_json))
    copy = fz["copy_gbs"]
    sizes = [1 << int(e) for e in args.log2n.split(",")]
    results = {}  # (system, expr, dtype, n) -> us
    host = {}
    for sname, make in SYSTEMS.items():
        try:
            run = make()
        except Exception as e:  # a missing framework leaves its column empty
            print(f"{sname}: unavailable ({e})", file=sys.stderr)
            continue
        for name in EXPRS:
            for dtype in ("float32", "bfloat16"):
                for n in sizes:
                    try:
                        results[(sname, name, dtype, n)] = run(name, dtype, n, False)
                    except Exception as e:
                        print(f"{sname} {name} {dtype} {n}: {type(e).__name__}: {e}", file=sys.stderr)
        try:
            host[sname] = run("2.5*x+y", "float32", 1024, True)
        except Exception as e:
            print(f"{sname} host timing: {e}", file=sys.stderr)
    first = {}
    for sname in SYSTEMS:
        with tempfile.TemporaryDirectory() as cache:
            first[sname] = (first_call_ms(sname, cache), first_call_ms(sname, cache))
    with tempfile.TemporaryDirectory() as cache:
        def fusion_first():
            out = subprocess.run([args.fusion_bench, "--first-call"], env=dict(os.environ, FUSION_CACHE_DIR=cache),
                                 capture_output=True, text=True)
            print("fusion:", out.stdout.strip(), file=sys.stderr)
            return float(out.stdout.split()[1])
        first["fusion"] = (fusion_first(), fusion_first())

    systems = ["fusion"] + list(SYSTEMS)
    print(f"\nSide by side on {fz['device']}, {fz['date'][:10]}: GPU us (median) and % of copy bandwidth ({copy:.0f} GB/s)")
    head = f"{'expression':<24} {'dtype':<9} {'n':>5} " + " ".join(f"{s:>19}" for s in systems)
    print(head)
    rows = []
    for name in EXPRS:
        for dtype in ("float32", "bfloat16"):
            for n in sizes:
                cells, record = [], {"expression": name, "dtype": dtype, "n": n}
                frow = next((r for r in fz["rows"] if r["expression"] == name and r["dtype"] == dtype and r["n"] == n), None)
                width = 2 if dtype == "bfloat16" else 4
                nbytes = ARRAYS[name] * width * n
                for s in systems:
                    us = frow["fused_us"] if s == "fusion" and frow else results.get((s, name, dtype, n))
                    record[s] = us
                    cells.append(f"{us:9.1f} {100 * nbytes / (us * 1e3) / copy:6.1f}%" if us else f"{'n/a':>19}")
                rows.append(record)
                print(f"{name:<24} {dtype:<9} 2^{n.bit_length() - 1:<3} " + " ".join(f"{c:>19}" for c in cells))
    host["fusion"] = fz["dispatch_us"]["fused"]
    print(f"{'host us per call (1024)':<41} " + " ".join(f"{host.get(s, float('nan')):19.2f}" for s in systems))
    print(f"{'first call, cold cache (ms)':<41} " + " ".join(f"{(first[s][0] or float('nan')):19.1f}" for s in systems))
    print(f"{'first call, warm cache (ms)':<41} " + " ".join(f"{(first[s][1] or float('nan')):19.2f}" for s in systems))
    if args.out:
        json.dump({"device": fz["device"], "date": fz["date"], "copy_gbs": copy, "rows": rows, "host_us": host,
                   "first_call_ms": first}, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
