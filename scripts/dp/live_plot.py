#!/usr/bin/env python3
"""Draws slots per account over time from scripts/dp/live.sh's slots.csv as an SVG
(no plotting library needed): map slots used (solid) and allotted (dashed) per account,
and a vertical line where the rate was raised. Also prints the mean map slots used per
account before and after the boost, and when the boosted account first held its new
share.

    live_plot.py slots.csv slots.svg
"""
import csv
import sys

COLORS = {"alice": "#d62728", "bob": "#1f77b4"}


def main():
    src, dst = sys.argv[1], sys.argv[2]
    rows, boost = [], None
    for r in csv.DictReader(open(src)):
        if r["account"] == "boost":
            boost = float(r["t_s"])
            continue
        rows.append((float(r["t_s"]), r["account"], float(r["rate"]), int(r["share_map"]), int(r["used_map"])))
    accounts = sorted({r[1] for r in rows})
    t_max = max(r[0] for r in rows)
    y_max = max(max(r[3], r[4]) for r in rows) + 1
    w, h, m = 800, 360, 50
    x = lambda t: m + (w - 2 * m) * t / t_max
    y = lambda v: h - m - (h - 2 * m) * v / y_max
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
           f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
           f'<text x="{w / 2}" y="{h - 10}" text-anchor="middle">time (s)</text>',
           f'<text x="12" y="{h / 2}" transform="rotate(-90 12 {h / 2})" text-anchor="middle">map slots</text>']
    for v in range(0, int(y_max) + 1, 2):
        out.append(f'<text x="{m - 6}" y="{y(v) + 4}" text-anchor="end">{v}</text>')
    for t in range(0, int(t_max) + 1, 25):
        out.append(f'<text x="{x(t)}" y="{h - m + 16}" text-anchor="middle">{t}</text>')
    for i, a in enumerate(accounts):
        color = COLORS.get(a, "#2ca02c")
        pts = [(r[0], r[3], r[4]) for r in rows if r[1] == a]
        used = " ".join(f"{x(t):.1f},{y(u):.1f}" for t, _, u in pts)
        share = " ".join(f"{x(t):.1f},{y(s):.1f}" for t, s, _ in pts)
        out.append(f'<polyline points="{used}" fill="none" stroke="{color}" stroke-width="2"/>')
        out.append(f'<polyline points="{share}" fill="none" stroke="{color}" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{w - m - 150}" y="{m + 16 * i}" fill="{color}">{a}: used (solid), share (dashed)</text>')
    if boost is not None:
        out.append(f'<line x1="{x(boost)}" y1="{m}" x2="{x(boost)}" y2="{h - m}" stroke="gray" stroke-dasharray="2 2"/>')
        out.append(f'<text x="{x(boost) + 4}" y="{m + 12}" fill="gray">alice rate 1 → 4</text>')
    out.append("</svg>")
    open(dst, "w").write("\n".join(out))
    if boost is None:
        return
    for a in accounts:
        before = [r[4] for r in rows if r[1] == a and 20 <= r[0] < boost]
        after = [r[4] for r in rows if r[1] == a and r[0] >= boost + 20]
        mean = lambda v: sum(v) / len(v) if v else float("nan")
        print(f"{a}: mean map slots used {mean(before):.2f} before the boost (from 20 s), {mean(after):.2f} from 20 s after it")
    hit = [r for r in rows if r[1] == "alice" and r[0] >= boost and r[4] >= r[3] and r[2] >= 4]
    if hit:
        print(f"alice first held her new share {hit[0][0] - boost:.1f} s after the boost")


if __name__ == "__main__":
    main()
