#!/usr/bin/env bash
# MRM §6.3 in the simulator: MRM (edf + mrm admission, alpha in {2, 1.5, 1.1}) against
# fifo and priority (each promised FCFS's finish time), over several seeds and the
# paper's inter-arrival times, on MRM's 40-node cluster (2 map + 2 reduce slots each).
# Prints one TSV line per (inter-arrival, scheduler, class), averaged over the seeds.
#
#   scripts/experiments/mrm.sh [JOBS] [SEEDS]     # defaults: 2000 jobs, 5 seeds
#
# Needs `cargo build --release -p slotmarket-master --bin slotmarket-sim` and python3.
set -euo pipefail
JOBS=${1:-2000}
SEEDS=${2:-5}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
SIM=${SIM:-${CARGO_TARGET_DIR:-$ROOT/target}/release/slotmarket-sim}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

run() { # ia seed label args...
  local ia=$1 seed=$2 label=$3; shift 3
  "$SIM" run --trace "$WORK/t-$ia-$seed.jsonl" --seed "$seed" --json --kappa 2 --estimate-noise 0.1 "$@" \
    | tail -n 1 | sed "s/^/$ia\t$label\t/"
}

for ia in 40 44 50 100 200; do
  for seed in $(seq 1 "$SEEDS"); do
    "$SIM" gen mrm --jobs "$JOBS" --interarrival "$ia" --seed "$seed" -o "$WORK/t-$ia-$seed.jsonl"
    for alpha in 2 1.5 1.1; do
      run "$ia" "$seed" "mrm-a$alpha" --policy edf --admission mrm --alpha "$alpha"
    done
    run "$ia" "$seed" fifo --policy fifo --admission fcfs
    run "$ia" "$seed" priority --policy priority --admission fcfs
  done
done > "$WORK/all.tsv"

python3 - "$WORK/all.tsv" <<'PY'
import json, sys
from collections import defaultdict
acc = defaultdict(list)
for line in open(sys.argv[1]):
    ia, label, js = line.rstrip("\n").split("\t", 2)
    for cls, f in json.loads(js)["classes"]:
        acc[(int(ia), label, cls)].append(f)
keys = ["violation_pct", "mean_wait_s", "p95_wait_s", "mean_earliness_s", "median_slack_s",
        "p95_slack_s", "median_premium", "p95_premium", "jumped_pct"]
print("ia_s\tscheduler\tclass\truns\t" + "\t".join(keys) + "\tmax_violation_pct")
for (ia, label, cls), fs in sorted(acc.items()):
    mean = [sum(f[k] for f in fs) / len(fs) for k in keys]
    worst = max(f["violation_pct"] for f in fs)
    print(f"{ia}\t{label}\t{cls}\t{len(fs)}\t" + "\t".join(f"{v:.2f}" for v in mean) + f"\t{worst:.2f}")
PY
