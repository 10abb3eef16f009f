#!/usr/bin/env python3
"""fusion-bench's random suite (dropout with its mask drawn in the kernel, and uniform and normal generation
alone, 2^26 values in float32 and float64) through torch eager, torch.compile and jax.jit on the same GPU, in
the same run, beside fusion's figures as % of the memory limit. The least bytes of each case are fusion-bench's
(dropout: the input read and the output written; a generator: its output written).

    fusion-bench --random --json random.json && python3 bench/peers/random_numbers.py --fusion-json random.json

Timing and the table: suite.py.
"""
import suite

N = 2 ** 26


def cases():
    """(fusion-bench's name, dtype, function of module adapter m and arrays, arrays' shapes, least bytes)."""
    out = []
    for dtype in ("float32", "float64"):
        out.append(("dropout p=0.5", dtype, lambda m, x: m.dropout(x, 0.5), [(N,)], None))
        out.append(("uniform", dtype, lambda m, dtype=dtype: m.uniform((N,), dtype), [], None))
        out.append(("normal", dtype, lambda m, dtype=dtype: m.normal((N,), dtype), [], None))
    return out


def torch_module():
    import torch
    class M:
        @staticmethod
        def dropout(x, p): return torch.nn.functional.dropout(x, p, training=True)
        @staticmethod
        def uniform(shape, dtype): return torch.rand(shape, dtype=getattr(torch, dtype), device="cuda")
        @staticmethod
        def normal(shape, dtype): return torch.randn(shape, dtype=getattr(torch, dtype), device="cuda")
    return M


def jax_module():
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)  # float64 generation as the float64 rows ask
    key = jax.random.PRNGKey(7)
    class M:
        @staticmethod
        def dropout(x, p): return jnp.where(jax.random.bernoulli(key, p, x.shape), 0, x / (1 - p))
        @staticmethod
        def uniform(shape, dtype): return jax.random.uniform(key, shape, dtype=getattr(jnp, dtype))
        @staticmethod
        def normal(shape, dtype): return jax.random.normal(key, shape, dtype=getattr(jnp, dtype))
    return M


if __name__ == "__main__":
    suite.main(cases(), torch_module, jax_module)
