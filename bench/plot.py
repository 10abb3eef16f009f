#!/usr/bin/env python3
"""Draws bench results as SVG, with no dependency beyond Python: for each expression at the largest size,
fused and unfused GPU time (bars) and the fused kernel's % of copy bandwidth (label).

    python3 bench/plot.py bench.json bench.svg
"""
import json, sys
from xml.sax.saxutils import escape

def main(src, dst):
    data = json.load(open(src))
    n = max(r["n"] for r in data["rows"])
    rows = [r for r in data["rows"] if r["n"] == n]
    top = max(max(r["fused_us"], r["unfused_us"]) for r in rows)
    bar_h, gap, left, width = 14, 12, 260, 560
    height = 70 + len(rows) * (2 * bar_h + gap) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 140}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<text x="10" y="20" font-size="15" font-weight="bold">fusion: fused vs unfused GPU time, 2^{n.bit_length() - 1} elements</text>',
           f'<text x="10" y="38" fill="#555">{escape(data["device"])}, {data["date"][:10]}; copy bandwidth {data["copy_gbs"]:.0f} GB/s; '
           'label: fused GB/s as % of copy</text>',
           '<rect x="10" y="48" width="12" height="10" fill="#2a7ab0"/><text x="26" y="57">fused</text>',
           '<rect x="80" y="48" width="12" height="10" fill="#d08c3c"/><text x="96" y="57">unfused (one kernel per op)</text>']
    y = 70
    for r in rows:
        out.append(f'<text x="10" y="{y + bar_h + 4}">{escape(r["expression"])} ({r["dtype"]})</text>')
        for i, (key, color) in enumerate((("fused_us", "#2a7ab0"), ("unfused_us", "#d08c3c"))):
            w = max(1, width * r[key] / top)
            out.append(f'<rect x="{left}" y="{y + i * bar_h}" width="{w:.1f}" height="{bar_h - 2}" fill="{color}"/>')
            label = f'{r[key]:.0f} us' + (f'  {r["pct_copy"]:.0f}% of copy' if key == "fused_us" else f'  {r["speedup"]:.1f}x slower')
            out.append(f'<text x="{left + w + 4:.1f}" y="{y + i * bar_h + bar_h - 3}">{label}</text>')
        y += 2 * bar_h + gap
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
