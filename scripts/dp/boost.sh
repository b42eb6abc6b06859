#!/usr/bin/env bash
# DP Fig. 10 in the simulator: ten users at rates 1..10; user n triples its rate for a
# window starting at n × 1000 s, as long as two of its jobs take at its normal rate.
# Compares the completion time of jobs submitted inside the window with the others.
# Usage: scripts/dp/boost.sh [OUT_DIR] [--preempt]
set -euo pipefail
out=${1:-runs/dp-boost}
preempt=${2:-}
sim=${SIM:-${CARGO_TARGET_DIR:-target}/release/slotmarket-sim}
seeds=${SEEDS:-"1 2 3 4 5"}
# Extra flags for every run (default: compensation over 60 s; "" for none).
read -r -a dp_args <<<"${DP_ARGS---set compensation_s=60}"
# Grace period of the runs with preemption (seconds).
grace=${GRACE:-15}
mkdir -p "$out"
accounts="$out/boost-accounts.jsonl"
sets=()
: >"$accounts"
for n in $(seq 1 10); do
  u=$(printf user%02d "$n")
  sets+=(--set "rates.$u=$n")
  # Normal completion time at share n/55 of 80 slots: 80 tasks × 15 s / (80 n / 55).
  window=$((2 * 15 * 55 / n))
  echo "{\"at_s\":$((n * 1000)),\"user\":\"$u\",\"rate\":$((3 * n))}" >>"$accounts"
  echo "{\"at_s\":$((n * 1000 + window)),\"user\":\"$u\",\"rate\":$n}" >>"$accounts"
done
for seed in $seeds; do
  "$sim" gen dp --users 10 --jobs 4000 --maps 80 --map-s 15 --reduces 1 --reduce-s 5 --seed "$seed" \
    -o "$out/boost-$seed.jsonl"
  "$sim" run --trace "$out/boost-$seed.jsonl" --seed "$seed" --horizon 14400 --policy proportional \
    ${preempt:+--preempt --set "grace_s=$grace"} "${sets[@]}" "${dp_args[@]}" --accounts "$accounts" --out "$out/boost-run-$seed" >/dev/null
done
python3 - "$out" "$accounts" <<'PY'
import csv, glob, json, statistics, sys
out, accounts = sys.argv[1], sys.argv[2]
events = [json.loads(l) for l in open(accounts)]
window = {}
for e in events:
    window.setdefault(e["user"], []).append(e["at_s"])
print("| user | rate | boosted jobs | mean completion boosted (s) | others (s) | speed-up | expected |")
print("|---|---|---|---|---|---|---|")
for n in range(1, 11):
    u = f"user{n:02}"
    start, end = window[u]
    boosted, other = [], []
    for d in glob.glob(f"{out}/boost-run-*/jobs.csv"):
        for row in csv.DictReader(open(d)):
            if row["account"] != u or row["state"] != "completed" or float(row["submit_s"]) > 11520:
                continue
            s = float(row["submit_s"])
            (boosted if start <= s < end else other).append(float(row["completion_s"]))
    expected = 3 * 55 / (55 + 2 * n)
    if boosted and other:
        b, o = statistics.mean(boosted), statistics.mean(other)
        print(f"| {u} | {n} → {3 * n} | {len(boosted)} | {b:.1f} | {o:.1f} | {o / b:.2f}× | {expected:.2f}× |")
    else:
        print(f"| {u} | {n} → {3 * n} | {len(boosted)} | - | - | - | {expected:.2f}× |")
PY
