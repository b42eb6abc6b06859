#!/usr/bin/env python3
"""DP fidelity figures (the paper's Fig. 7-9 and Table 3) from `slotmarket-sim run --out`
directories.

    fidelity.py --rates 2,1 --fifo RUN_DIR... --dp RUN_DIR...

Each RUN_DIR holds a jobs.csv. Users are user01, user02, ... in the order of --rates.
For every user it prints the mean completion time of its completed jobs over all the
runs given (one per seed), with a 95 % confidence half-width over the per-run means,
and the ideal: FIFO's throughput (n closed-loop users, one job each per F seconds)
shared in proportion to the rates, so user i would finish a job every F / (n * share_i)
seconds (perfect differentiation, no throughput lost).
Only jobs submitted before --until seconds count, so that every user was still
competing (a closed-loop stream whose partner has finished runs alone).
"""
import argparse
import csv
import math
import os
import statistics


def per_user_means(run_dirs, users, until):
    """{user: [mean completion per run]} over completed jobs submitted before `until`."""
    out = {u: [] for u in users}
    for d in run_dirs:
        times = {u: [] for u in users}
        with open(os.path.join(d, "jobs.csv")) as f:
            for row in csv.DictReader(f):
                if row["state"] != "completed" or row["account"] not in times:
                    continue
                if float(row["submit_s"]) >= until:
                    continue
                times[row["account"]].append(float(row["completion_s"]))
        for u in users:
            if times[u]:
                out[u].append(statistics.mean(times[u]))
    return out


def mean_ci(values):
    if not values:
        return float("nan"), float("nan")
    m = statistics.mean(values)
    if len(values) < 2:
        return m, float("nan")
    return m, 1.96 * statistics.stdev(values) / math.sqrt(len(values))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rates", required=True, help="comma-separated rates of user01, user02, ...")
    p.add_argument("--fifo", nargs="+", required=True)
    p.add_argument("--dp", nargs="+", required=True)
    p.add_argument("--until", type=float, default=float("inf"))
    p.add_argument("--label", default="dp")
    a = p.parse_args()
    rates = [float(r) for r in a.rates.split(",")]
    users = [f"user{i + 1:02}" for i in range(len(rates))]
    fifo = per_user_means(a.fifo, users, a.until)
    dp = per_user_means(a.dp, users, a.until)
    fifo_all = statistics.mean(v for u in users for v in fifo[u])
    # FIFO finishes one job per F/n seconds over n closed-loop users; shared by rate
    # instead, user i finishes a job every F / (n * share_i) seconds.
    n, total = len(rates), sum(rates)
    ideal = [fifo_all / (n * r / total) for r in rates]
    print(f"FIFO mean completion over all users: {fifo_all:.1f} s")
    print(f"| user | rate | {a.label} mean (s) | ±95 % | ideal (s) | distance (s) | within ±10 % of ideal |")
    print("|---|---|---|---|---|---|---|")
    means = []
    for u, r, ideal_u in zip(users, rates, ideal):
        m, h = mean_ci(dp[u])
        means.append(m)
        ok = "yes" if abs(m - ideal_u) <= 0.1 * ideal_u else "no"
        print(f"| {u} | {r:g} | {m:.1f} | {h:.1f} | {ideal_u:.1f} | {m - ideal_u:+.1f} | {ok} |")
    if len(users) == 2:
        print(f"completion ratio user02/user01: {means[1] / means[0]:.3f} (ideal {rates[0] / rates[1]:.3f})")
    overall = statistics.mean(means)
    jobs_per_s = sum(1 / m for m in means)
    fifo_per_s = n / fifo_all
    print(f"mean over users: {overall:.1f} s; throughput {jobs_per_s * 3600:.1f} jobs/h vs FIFO {fifo_per_s * 3600:.1f} ({100 * (jobs_per_s / fifo_per_s - 1):+.2f} %)")


if __name__ == "__main__":
    main()
