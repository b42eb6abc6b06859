#!/usr/bin/env python3
"""The smallest constant allocation that meets each Jockey deadline run, in hindsight.

For seeds 1..N of `slotmarket-sim gen jockey`, takes the deadline run's actual task times
(no per-attempt noise, no failures, no competing work) and list-schedules its DAG on `a`
slots (ready tasks in stage order, as the completion-model builder does), and finds by
bisection the smallest `a` that finishes by the deadline. Compares it with the oracle
⌈T/d⌉ of §5.1, which ignores the DAG: `a*/oracle - 1` is the least allocation above the
oracle any constant guarantee could have had on that run, knowing everything.

usage: feasible_allocation.py SIM_BINARY SEEDS DEADLINE_SLOTS [DEADLINE_SLOTS ...]
"""
import heapq
import json
import math
import subprocess
import sys


def trace(sim, seed, slots):
    out = subprocess.run(
        [sim, "gen", "jockey", "--seed", str(seed), "--deadline-slots", str(slots), "-o", "-"],
        check=True, capture_output=True, text=True).stdout
    jobs = [json.loads(line) for line in out.splitlines() if line.strip()]
    return next(j for j in jobs if j["id"] == "slo")


def finish(stages, slots):
    """Makespan of the DAG on `slots` slots, tasks started in stage order as they are ready."""
    index = {s["name"]: i for i, s in enumerate(stages)}
    after = [[index[d] for d in (s.get("after") or [])] for s in stages]
    left = [s["tasks"] for s in stages]
    released = [False] * len(stages)
    ready, running, now = [], [], 0.0

    def release():
        for i, s in enumerate(stages):
            if not released[i] and all(left[d] == 0 for d in after[i]):
                released[i] = True
                ready.extend((i, t) for t in s["duration_s"])

    release()
    while ready or running:
        while ready and len(running) < slots:
            i, t = ready.pop(0)
            heapq.heappush(running, (now + t, i))
        now, i = heapq.heappop(running)
        left[i] -= 1
        if left[i] == 0:
            release()
    return now


def main():
    sim, seeds, deadlines = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3:]]
    for n in deadlines:
        rows = []
        for seed in range(1, seeds + 1):
            job = trace(sim, seed, n)
            d = job["deadline_s"] - job["arrival_s"]
            work = sum(sum(s["duration_s"]) for s in job["stages"])
            oracle = max(1, math.ceil(work / d))
            if finish(job["stages"], 100) > d:
                rows.append((seed, oracle, None))
                continue
            lo, hi = 1, 100
            while lo < hi:
                mid = (lo + hi) // 2
                if finish(job["stages"], mid) <= d:
                    hi = mid
                else:
                    lo = mid + 1
            rows.append((seed, oracle, lo))
        feasible = [(s, o, a) for s, o, a in rows if a is not None]
        above = [a / o - 1 for _, o, a in feasible]
        share = [(a - o) / a for _, o, a in feasible]
        print(f"N = {n}: {len(feasible)} of {len(rows)} runs feasible on 100 slots without noise;"
              f" least constant allocation above the oracle: mean {100 * sum(above) / len(above):+.1f} %,"
              f" median {100 * sorted(above)[len(above) // 2]:+.1f} %; share above (§5.1) mean"
              f" {100 * sum(share) / len(share):.1f} %")
        for s, o, a in rows:
            print(f"  seed {s}: oracle {o} least constant {a}")


if __name__ == "__main__":
    main()
