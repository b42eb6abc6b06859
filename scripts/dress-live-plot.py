#!/usr/bin/env python3
"""Per-job plot of a DRESS live run (the paper's Fig. 7 style) from the CSV that
`scripts/dress-live.sh` writes:

    dress-live-plot.py OUT/live.csv -o OUT/live.svg

Two panels, waiting time and completion time, with one pair of bars per job in
submission order (the first policy in the CSV, then the second) and each job's class
(SD/LD) under its name. SVG is written by hand: only the standard library is needed.
"""
import argparse
import csv
import re
from html import escape

WIDTH, PANEL_H, TOP, LEFT, BOTTOM = 900, 230, 40, 60, 60
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"]


def job_key(name):
    """Submission order: the number after the leading `j` of names like j7-small-sort."""
    match = re.match(r"j(\d+)", name)
    return (int(match.group(1)) if match else 0, name)


def read(path):
    """({policy: {job: (wait, completion)}}, policies in file order, {job: class})."""
    runs, order, classes = {}, [], {}
    with open(path) as f:
        for row in csv.DictReader(f):
            policy = row["policy"]
            if policy not in runs:
                runs[policy] = {}
                order.append(policy)
            runs[policy][row["name"]] = (float(row["wait_s"]), float(row["completion_s"]))
            classes[row["name"]] = "SD" if row["class"] == "small" else "LD"
    return runs, order, classes


def panel(out, y0, title, jobs, runs, order, pick):
    """One bar panel at height y0: `pick` chooses wait (0) or completion (1)."""
    top = max((runs[p][j][pick] for p in order for j in jobs if j in runs[p]), default=1.0)
    top = max(top, 1.0) * 1.1
    plot_w = WIDTH - LEFT - 20
    slot = plot_w / max(len(jobs), 1)
    bar = slot * 0.8 / max(len(order), 1)
    y = lambda v: y0 + PANEL_H - v / top * PANEL_H
    out.append(f'<text x="{LEFT}" y="{y0 - 8}" font-size="13">{escape(title)}</text>')
    for k in range(5):
        v = top / 1.1 * k / 4
        out.append(f'<line x1="{LEFT}" x2="{WIDTH - 20}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 5}" y="{y(v) + 4:.1f}" font-size="10" text-anchor="end">{v:.0f}</text>')
    for i, job in enumerate(jobs):
        for n, policy in enumerate(order):
            if job not in runs[policy]:
                continue
            v = runs[policy][job][pick]
            x = LEFT + i * slot + slot * 0.1 + n * bar
            out.append(
                f'<rect x="{x:.1f}" y="{y(v):.1f}" width="{bar:.1f}" height="{y0 + PANEL_H - y(v):.1f}" '
                f'fill="{COLOURS[n % len(COLOURS)]}"><title>{escape(job)} {escape(policy)}: {v:.1f} s</title></rect>'
            )
    out.append(f'<line x1="{LEFT}" x2="{WIDTH - 20}" y1="{y0 + PANEL_H}" y2="{y0 + PANEL_H}" stroke="#000"/>')
    return slot


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv")
    parser.add_argument("-o", "--output", required=True)
    args = parser.parse_args()
    runs, order, classes = read(args.csv)
    jobs = sorted(classes, key=job_key)
    height = TOP + 2 * (PANEL_H + BOTTOM) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif">',
           f'<rect width="{WIDTH}" height="{height}" fill="white"/>']
    for n, policy in enumerate(order):
        x = LEFT + 260 + n * 120
        out.append(f'<rect x="{x}" y="8" width="12" height="12" fill="{COLOURS[n % len(COLOURS)]}"/>')
        out.append(f'<text x="{x + 16}" y="18" font-size="12">{escape(policy)}</text>')
    for p, (title, pick) in enumerate([("waiting time per job (s)", 0), ("completion time per job (s)", 1)]):
        y0 = TOP + 20 + p * (PANEL_H + BOTTOM)
        slot = panel(out, y0, title, jobs, runs, order, pick)
        for i, job in enumerate(jobs):
            cx = LEFT + (i + 0.5) * slot
            label = job.split("-")[0]
            out.append(f'<text x="{cx:.1f}" y="{y0 + PANEL_H + 14}" font-size="11" text-anchor="middle">{escape(label)}</text>')
            out.append(f'<text x="{cx:.1f}" y="{y0 + PANEL_H + 27}" font-size="10" text-anchor="middle" '
                       f'fill="#555">{classes[job]}</text>')
    out.append("</svg>")
    with open(args.output, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
