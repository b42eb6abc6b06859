#!/usr/bin/env python3
"""Predicted vs actual finish of the jobs of a buying `slotmarket workload run --alpha`
(python3 stdlib only). Per job, x is its actual finish and y what the master predicted
it, both in seconds after its submission: a hollow circle at the first prediction seen
while it ran, a filled dot at the last, a thin vertical line over every prediction in
between, and a short dash at its bought deadline; the diagonal is a perfect prediction.
Delay-sensitive jobs are red, delay-tolerant blue. Prints the mean absolute error of the
first and last predictions and the share of first predictions at or after the finish.

    predicted_plot.py mrm.csv predictions.csv predicted.svg
"""
import csv
import sys

COLORS = {"delay-sensitive": "#d62728", "delay-tolerant": "#1f77b4", "none": "#7f7f7f"}


def main():
    jobs_csv, predictions_csv, dst = sys.argv[1], sys.argv[2], sys.argv[3]
    jobs = [r for r in csv.DictReader(open(jobs_csv)) if r["finish_s"] and r["predicted_first_s"]]
    seen = {}
    for r in csv.DictReader(open(predictions_csv)):
        seen.setdefault(r["job"], []).append(float(r["predicted_s"]))
    if not jobs:
        sys.exit("no completed job with a prediction")
    top = max(max(float(j["finish_s"]), float(j["deadline_s"]), *seen.get(j["job"], [0.0])) for j in jobs)
    top = top * 1.05 + 1
    w, h, m = 560, 560, 55
    x = lambda v: m + (w - 2 * m) * v / top
    y = lambda v: h - m - (h - 2 * m) * v / top
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(top)}" y2="{y(top)}" stroke="#aaa" stroke-dasharray="4 3"/>',
        f'<line x1="{m}" y1="{h - m}" x2="{w - m}" y2="{h - m}" stroke="black"/>',
        f'<line x1="{m}" y1="{m}" x2="{m}" y2="{h - m}" stroke="black"/>',
    ]
    step = nice_step(top)
    tick = 0.0
    while tick <= top:
        out.append(f'<text x="{x(tick)}" y="{h - m + 16}" text-anchor="middle">{tick:g}</text>')
        out.append(f'<text x="{m - 6}" y="{y(tick) + 4}" text-anchor="end">{tick:g}</text>')
        tick += step
    out.append(f'<text x="{w / 2}" y="{h - 12}" text-anchor="middle">actual finish (s after submission)</text>')
    out.append(
        f'<text x="14" y="{h / 2}" text-anchor="middle" transform="rotate(-90 14 {h / 2})">'
        "predicted finish (s after submission)</text>"
    )
    errors_first, errors_last, late_first = [], [], 0
    for j in jobs:
        color = COLORS.get(j["class"], "#7f7f7f")
        finish, first, last = float(j["finish_s"]), float(j["predicted_first_s"]), float(j["predicted_last_s"])
        values = seen.get(j["job"], [first, last])
        out.append(
            f'<line x1="{x(finish)}" y1="{y(min(values))}" x2="{x(finish)}" y2="{y(max(values))}" '
            f'stroke="{color}" stroke-width="1" opacity="0.6"/>'
        )
        deadline = float(j["deadline_s"])
        out.append(
            f'<line x1="{x(finish) - 4}" y1="{y(deadline)}" x2="{x(finish) + 4}" y2="{y(deadline)}" stroke="{color}"/>'
        )
        out.append(f'<circle cx="{x(finish)}" cy="{y(first)}" r="4" fill="none" stroke="{color}"/>')
        out.append(f'<circle cx="{x(finish)}" cy="{y(last)}" r="2.5" fill="{color}"/>')
        errors_first.append(abs(first - finish))
        errors_last.append(abs(last - finish))
        late_first += first >= finish
    legend = [
        ("delay-sensitive", COLORS["delay-sensitive"]),
        ("delay-tolerant", COLORS["delay-tolerant"]),
    ]
    for i, (name, color) in enumerate(legend):
        out.append(f'<circle cx="{m + 12}" cy="{m + 10 + 16 * i}" r="4" fill="{color}"/>')
        out.append(f'<text x="{m + 22}" y="{m + 14 + 16 * i}">{name}</text>')
    out.append(
        f'<text x="{m + 12}" y="{m + 46}">o first prediction, • last, | all, - deadline</text>'
    )
    out.append("</svg>")
    open(dst, "w").write("\n".join(out) + "\n")
    n = len(jobs)
    print(
        f"{n} jobs: mean |first prediction - finish| {sum(errors_first) / n:.2f} s, "
        f"mean |last prediction - finish| {sum(errors_last) / n:.2f} s, "
        f"first prediction at or after the finish for {late_first}/{n}"
    )


def nice_step(top):
    for step in (1, 2, 5, 10, 20, 50, 100, 200, 500):
        if top / step <= 10:
            return step
    return 1000


if __name__ == "__main__":
    main()
