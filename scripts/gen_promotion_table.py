#!/usr/bin/env python3
"""Writes tests/golden/promotion.txt: NumPy's (and ml_dtypes' for bfloat16) result dtype for every
array-dtype pair and for each array dtype with a weak Python bool, int and float (NEP 50).
fusion's promotion test compares against it, so the table is NumPy's, not our reading of it."""
import numpy as np, ml_dtypes, pathlib

names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "float16", "bfloat16", "float32", "float64"]
dt = {n: np.dtype(ml_dtypes.bfloat16) if n == "bfloat16" else np.dtype(n) for n in names}

def name(d):
    return "bfloat16" if d == np.dtype(ml_dtypes.bfloat16) else d.name

lines = ["# a b result  (numpy %s, ml_dtypes %s)" % (np.__version__, ml_dtypes.__version__)]
for a in names:
    for b in names:
        try:
            r = name(np.promote_types(dt[a], dt[b]))
        except Exception:  # ml_dtypes defines no promotion for this pair; fusion documents its own
            r = "none"
        lines.append(f"{a} {b} {r}")
for a in names:
    for label, s in (("weak_bool", True), ("weak_int", 1), ("weak_float", 1.0)):
        try:
            r = name((np.zeros(1, dt[a]) + s).dtype)
        except Exception:
            r = "none"
        lines.append(f"{a} {label} {r}")
out = pathlib.Path(__file__).resolve().parent.parent / "tests" / "golden" / "promotion.txt"
out.write_text("\n".join(lines) + "\n")
print("wrote", out)
