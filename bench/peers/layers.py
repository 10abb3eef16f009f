#!/usr/bin/env python3
"""The layers suite of fusion-bench (softmax, log-softmax, layer norm, RMSNorm, var, a tie of two row
sums, batch norm at 2^26 elements) through torch eager, torch.compile and jax.jit on the same GPU, in
the same run, printed beside fusion's figures as % of the memory limit: the least bytes (each input read
once, each output written once) over the time, against the copy bandwidth fusion-bench measured.

    python3 bench/peers/layers.py --fusion-json layers.json [--out layers-peers.json]

Timing and the table: suite.py.
"""
import suite

N = 1 << 26
ROWS = [128, 1024, 4096, 8192, 16384, 65536]


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
        out.append(("softmax" + at, "bfloat16", lambda m, x: m.softmax16(x), [(r, d)], 4 * N))
        out.append(("layer_norm" + at, "bfloat16", lambda m, x, w: m.layer_norm16(x, w), [(r, d), (d,)], 4 * N + 2 * d))
        out.append(("var" + at, "float32", lambda m, x: m.var(x), [(r, d)], 4 * N + 4 * r))
        out.append(("tie(sum,sum sq)" + at, "float32", lambda m, x: m.sums(x), [(r, d)], 4 * N + 8 * r))
        out.append(("tie(mean,var)" + at, "float32", lambda m, x: m.var_mean(x), [(r, d)], 4 * N + 8 * r))
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
        def softmax16(x): return M.softmax(x.float()).to(x.dtype)
        @staticmethod
        def layer_norm16(x, w):
            xf = x.float()
            return ((xf - xf.mean(-1, keepdim=True)) * torch.rsqrt(xf.var(-1, keepdim=True, unbiased=False) + 1e-5) * w.float()).to(x.dtype)
        @staticmethod
        def var(x): return x.var(-1, unbiased=False)
        @staticmethod
        def sums(x): return x.sum(-1), (x * x).sum(-1)
        @staticmethod
        def var_mean(x): return torch.var_mean(x, -1, unbiased=False)
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
        def softmax16(x): return M.softmax(x.astype(jnp.float32)).astype(x.dtype)
        @staticmethod
        def layer_norm16(x, w):
            xf = x.astype(jnp.float32)
            return ((xf - xf.mean(-1, keepdims=True)) / jnp.sqrt(xf.var(-1, keepdims=True) + 1e-5) * w.astype(jnp.float32)).astype(x.dtype)
        @staticmethod
        def var(x): return x.var(-1)
        @staticmethod
        def sums(x): return x.sum(-1), (x * x).sum(-1)
        @staticmethod
        def var_mean(x): return x.var(-1), x.mean(-1)
        @staticmethod
        def var_all(x): return x.var()
        @staticmethod
        def sums_all(x): return x.sum(), (x * x).sum()
        @staticmethod
        def batch_norm(x, g, b): return (x - x.mean((0, 2, 3), keepdims=True)) / jnp.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5) * g + b
    return M


if __name__ == "__main__":
    suite.main(cases(), torch_module, jax_module)
