#!/usr/bin/env python3
"""Tables and Figure 9 of MRM §6.3 from `mrm.sh`'s TSV (ia, seed, scheduler, summary JSON).

Writes OUT/tables.md (Markdown: means over seeds, the worst seed's violations) and
OUT/fig9.svg (delay-sensitive wait and violations per class against the load)."""
import json
import sys
from collections import defaultdict

LABELS = ["mrm-a2", "mrm-a1.5", "mrm-a1.1", "fifo", "priority"]
CLASSES = [("delay-sensitive", "DS"), ("delay-tolerant", "DT")]


def load(path):
    acc = defaultdict(list)
    for line in open(path):
        ia, _seed, label, js = line.rstrip("\n").split("\t", 3)
        for cls, f in json.loads(js)["classes"]:
            acc[(int(ia), label, cls)].append(f)
    return acc


def table(acc, title, key, reduce="mean", fmt="{:.2f}", classes=CLASSES):
    ias = sorted({k[0] for k in acc})
    head = ["inter-arrival"] + [f"{l} {c}" for l in LABELS for _, c in classes]
    lines = [f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for ia in ias:
        row = [f"{ia} s"]
        for label in LABELS:
            for cls, _ in classes:
                vals = [f[key] for f in acc.get((ia, label, cls), []) if f.get(key) is not None]
                if not vals:
                    row.append("-")
                    continue
                v = max(vals) if reduce == "max" else sum(vals) / len(vals)
                row.append(fmt.format(v))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def svg(acc, path):
    """Figure 9: (a) mean wait of DS jobs, (b) violations of DS and DT, against inter-arrival."""
    ias = sorted({k[0] for k in acc})
    colors = {"mrm-a2": "#1f77b4", "mrm-a1.5": "#2ca02c", "mrm-a1.1": "#17becf", "fifo": "#7f7f7f", "priority": "#d62728"}

    def mean(ia, label, cls, key):
        vals = [f[key] for f in acc.get((ia, label, cls), [])]
        return sum(vals) / len(vals) if vals else 0.0

    panels = [("(a) delay-sensitive mean wait (s)", [("delay-sensitive", "mean_wait_s", "")]),
              ("(b) violations (%): solid DS, dashed DT", [("delay-sensitive", "violation_pct", ""), ("delay-tolerant", "violation_pct", "6,4")])]
    w, h, pad = 420, 300, 50
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w}" height="{h + 40}" font-family="sans-serif" font-size="11">']
    for p, (title, series) in enumerate(panels):
        x0 = p * w
        ymax = max(mean(ia, l, c, k) for ia in ias for l in LABELS for c, k, _ in series) * 1.1 or 1.0
        px = lambda i: x0 + pad + i * (w - 2 * pad) / max(len(ias) - 1, 1)
        py = lambda v: h - pad + 10 - v / ymax * (h - 2 * pad)
        out.append(f'<text x="{x0 + pad}" y="15">{title}</text>')
        out.append(f'<line x1="{x0 + pad}" y1="{py(0)}" x2="{x0 + w - pad}" y2="{py(0)}" stroke="black"/>')
        out.append(f'<line x1="{x0 + pad}" y1="{py(0)}" x2="{x0 + pad}" y2="{py(ymax)}" stroke="black"/>')
        for t in range(5):
            v = ymax * t / 4
            out.append(f'<text x="{x0 + 5}" y="{py(v) + 4:.1f}">{v:.1f}</text>')
        for i, ia in enumerate(ias):
            out.append(f'<text x="{px(i) - 10:.1f}" y="{py(0) + 15:.1f}">{ia} s</text>')
        for label in LABELS:
            for cls, key, dash in series:
                pts = " ".join(f"{px(i):.1f},{py(mean(ia, label, cls, key)):.1f}" for i, ia in enumerate(ias))
                dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
                out.append(f'<polyline points="{pts}" fill="none" stroke="{colors[label]}" stroke-width="2"{dash_attr}/>')
    for i, label in enumerate(LABELS):
        out.append(f'<text x="{pad + i * 110}" y="{h + 30}" fill="{colors[label]}">{label}</text>')
    out.append('<text x="{}" y="{}">inter-arrival time (s): heavier load to the left</text>'.format(w - 100, h + 15))
    out.append("</svg>")
    open(path, "w").write("\n".join(out) + "\n")


def main():
    acc = load(sys.argv[1])
    out = sys.argv[2]
    seeds = max(len(v) for v in acc.values())
    parts = [f"Means over {seeds} seeds unless said otherwise.\n"]
    parts.append(table(acc, "Deadline violations, % of completed jobs (Table 5, Figure 9(b))", "violation_pct"))
    parts.append(table(acc, "Worst seed's violations, %", "violation_pct", reduce="max"))
    parts.append(table(acc, "Mean wait from submission to first task, s (Figure 9(a))", "mean_wait_s"))
    parts.append(table(acc, "Mean earliness of met deadlines, s", "mean_earliness_s"))
    parts.append(table(acc, "Median slack offered (deadline − earliest feasible finish), s (Tables 6–7)", "median_slack_s"))
    parts.append(table(acc, "Median premium (price / actual slot time) (Table 8)", "median_premium"))
    parts.append(table(acc, "95th-percentile premium", "p95_premium"))
    parts.append(table(acc, "Jumped ahead against the FCFS run, % of the class (the paper's pairwise comparison)", "jumped_vs_fcfs_pct", fmt="{:.1f}"))
    parts.append(table(acc, "Found a delay-tolerant job submitted earlier still waiting on arrival, %", "found_queued_pct", fmt="{:.1f}"))
    parts.append(table(acc, "Jumped ahead against the FCFS run, % of those that found one waiting", "jumped_vs_fcfs_queued_pct", fmt="{:.1f}"))
    parts.append(table(acc, "Started before an earlier-submitted job had started, % (the old start-based metric)", "jumped_pct", fmt="{:.1f}"))
    open(f"{out}/tables.md", "w").write("\n".join(parts))
    svg(acc, f"{out}/fig9.svg")
    print(f"{out}/tables.md\n{out}/fig9.svg")


main()
