#!/usr/bin/env python3
"""SVG of the DP fidelity figure (the paper's Fig. 8-9): per-user mean completion time
against the ideal, log scale, from the Markdown tables `experiments.sh` prints.

    fidelity_plot.py TABLES.txt OUT.svg

Each "## NAME" section's table becomes one series of points; the ideal is a line with a
band of +-10 %. Users whose mean is nan are left out.
"""
import math
import re
import sys

W, H, L, R, T, B = 720, 420, 60, 20, 30, 40
COLOURS = ["#1f77b4", "#d62728", "#2ca02c"]


def read(path):
    """[(title, [(rate, mean, ideal)])] from the tables in `path`."""
    series = []
    for line in open(path):
        if line.startswith("## "):
            series.append((line[3:].strip(), []))
        m = re.match(r"\| user\d+ \| ([\d.]+) \| ([\d.na]+) \| [^|]* \| ([\d.]+) \|", line)
        if m and series and m.group(2) != "nan":
            series[-1][1].append((float(m.group(1)), float(m.group(2)), float(m.group(3))))
    return series


def main(src, out):
    series = read(src)
    points = [p for _, s in series for p in s]
    xmax = max(p[0] for p in points)
    ys = [v for p in points for v in (p[1], p[2] * 1.1, p[2] * 0.9)]
    lo, hi = math.log10(min(ys)), math.log10(max(ys))
    x = lambda r: L + (r - 1) / max(xmax - 1, 1) * (W - L - R)
    y = lambda v: H - B - (math.log10(v) - lo) / (hi - lo) * (H - T - B)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-size="11">']
    svg.append(f'<rect width="{W}" height="{H}" fill="white"/>')
    for decade in range(math.floor(lo), math.ceil(hi) + 1):
        v = 10**decade
        if lo <= decade <= hi:
            svg.append(f'<line x1="{L}" x2="{W - R}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
            svg.append(f'<text x="{L - 5}" y="{y(v) + 4:.1f}" text-anchor="end">{v:g} s</text>')
    ideal = sorted({(p[0], p[2]) for p in series[0][1]})
    for factor, dash in ((1.0, ""), (1.1, ' stroke-dasharray="4 3"'), (0.9, ' stroke-dasharray="4 3"')):
        pts = " ".join(f"{x(r):.1f},{y(v * factor):.1f}" for r, v in ideal)
        svg.append(f'<polyline points="{pts}" fill="none" stroke="black"{dash}/>')
    for i, (title, pts) in enumerate(series):
        c = COLOURS[i % len(COLOURS)]
        for r, mean, _ in pts:
            svg.append(f'<circle cx="{x(r):.1f}" cy="{y(mean):.1f}" r="2.5" fill="{c}"/>')
        svg.append(f'<text x="{W - R - 250}" y="{T + 14 * i}" fill="{c}">{title}</text>')
    svg.append(f'<text x="{W - R - 250}" y="{T + 14 * len(series)}">ideal (solid), ±10 % (dashed)</text>')
    svg.append(f'<text x="{(W + L) / 2}" y="{H - 8}" text-anchor="middle">user (spending rate)</text>')
    svg.append(f'<text x="{L}" y="{T - 12}">mean completion time (log)</text>')
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
