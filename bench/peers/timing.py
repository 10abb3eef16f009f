# SPDX-License-Identifier: Apache-2.0
"""Event timing for the torch peer scripts, as fusion's benchmarks time themselves: `calls` calls between two
CUDA events, the median of `runs` such samples, in ms per call (after `warmup` untimed calls)."""
import torch


def median_ms(run, calls=10, runs=9, warmup=3):
    for _ in range(warmup):
        run()
    times = []
    for _ in range(runs):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / calls)
    return sorted(times)[len(times) // 2]
