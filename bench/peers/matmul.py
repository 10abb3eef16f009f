# SPDX-License-Identifier: Apache-2.0
"""torch.matmul on the shapes of fusion-bench-matmul, timed as it times fusion (events around 10-50 calls,
median of 7 runs): TFLOPS beside fusion's, in the same device session.
    python3 bench/peers/matmul.py"""
import torch

CASES = [("8192^3", 8192, 8192, 8192, torch.bfloat16, False),
         ("8192x14336x4096 (MLP up)", 8192, 14336, 4096, torch.bfloat16, False),
         ("8192x4096x14336 (MLP down)", 8192, 4096, 14336, torch.bfloat16, False),
         ("8192^3", 8192, 8192, 8192, torch.float16, False),
         ("8192^3 TF32", 8192, 8192, 8192, torch.float32, True),
         ("4096^3", 4096, 4096, 4096, torch.float32, False),
         ("1024^3", 1024, 1024, 1024, torch.bfloat16, False),
         ("256x256x256", 256, 256, 256, torch.bfloat16, False)]


def median_ms(run, calls):
    times = []
    for _ in range(7):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) / calls)
    return sorted(times)[len(times) // 2]


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
        ms = median_ms(lambda: torch.matmul(a, b, out=out), calls)
        print(f"{name:<28} {str(dtype).replace('torch.', ''):>9} {ms:9.3f} {2 * m * n * k / ms / 1e9:8.1f}")


if __name__ == "__main__":
    main()
