#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Issue 16's peers: the 10-statement step of `fusion-bench --steps` (1024 float32 elements) in PyTorch
eager, torch.compile (default and mode="reduce-overhead") and a hand-captured CUDA graph: host time per step
(50 steps issued, then synchronized untimed) and GPU time per step (events around the batch), medians of 9."""
import statistics
import time

import torch


def ten_statements(x, y, z):
    a = x * 1.1 + y
    b = a * a - z
    c = torch.sin(b) + x
    d = c * 0.5 + a
    e = d - b * 0.25
    f = e * e + 1.0
    g = torch.sqrt(f) * c
    h = g + d
    y.copy_(h * 0.9 + y * 0.1)
    z.copy_(z * 0.99 + g * 0.01)


def times(step, steps=50):
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    host, gpu = [], []
    for _ in range(9):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        t1 = time.perf_counter()
        stop.record()
        stop.synchronize()
        host.append((t1 - t0) * 1e6 / steps)
        gpu.append(start.elapsed_time(stop) * 1e3 / steps)
    return statistics.median(host), statistics.median(gpu)


def main():
    n = 1024
    gen = torch.Generator(device="cuda").manual_seed(1)
    x = torch.rand(n, device="cuda", generator=gen) * 2 - 1
    y = torch.rand(n, device="cuda", generator=gen) * 2 - 1
    z = torch.rand(n, device="cuda", generator=gen)
    rows = [("torch eager", times(lambda: ten_statements(x, y, z)))]
    compiled = torch.compile(ten_statements)
    rows.append(("torch.compile default", times(lambda: compiled(x, y, z))))
    overhead = torch.compile(ten_statements, mode="reduce-overhead")
    rows.append(("torch.compile reduce-overhead", times(lambda: overhead(x, y, z))))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            ten_statements(x, y, z)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        ten_statements(x, y, z)
    rows.append(("CUDA graph (torch, eager ops)", times(graph.replay)))
    print(f"10-statement step, {n} float32 elements, {torch.cuda.get_device_name()} (torch {torch.__version__})")
    print(f"  {'mode':<32} {'host us/step':>12} {'GPU us/step':>12}")
    for name, (h, g) in rows:
        print(f"  {name:<32} {h:>12.2f} {g:>12.2f}")


if __name__ == "__main__":
    main()
