#!/usr/bin/env bash
# DP §4 experiments in the simulator: 2 users at 2:1 (paper-like tasks and fine-grained
# ones) and 10 users at rates 1..10, each under fifo and proportional without and with
# preemption, over seeds. Prints the tables of docs/experiments/dp.md.
# Usage: scripts/dp/experiments.sh [OUT_DIR] (default runs/dp; EXPERIMENTS="two ten" picks some); needs a release build of
# slotmarket-sim (cargo build --release -p slotmarket-master --bin slotmarket-sim).
set -euo pipefail
out=${1:-runs/dp}
sim=${SIM:-${CARGO_TARGET_DIR:-target}/release/slotmarket-sim}
seeds=${SEEDS:-"1 2 3 4 5 6 7 8 9 10"}
# Extra flags for every proportional run (default: compensation over 60 s; "" for none).
read -r -a dp_args <<<"${DP_ARGS---set compensation_s=60}"
# Grace period of the runs with preemption (seconds).
grace=${GRACE:-0}
here=$(dirname "$0")
mkdir -p "$out"

# experiment NAME USERS MAPS MAP_S REDUCE_S HORIZON_S INTERVAL_S
experiment() {
  local name=$1 users=$2 maps=$3 map_s=$4 reduce_s=$5 horizon=$6 interval=$7
  local rates=() sets=()
  for ((u = 1; u <= users; u++)); do
    local r=$u
    [[ $users == 2 ]] && r=$((3 - u)) # two users: user01 at 2, user02 at 1
    rates+=("$r")
    sets+=(--set "rates.user$(printf %02d "$u")=$r")
  done
  local jobs=$((users * 400))
  [[ $users == 80 ]] && jobs=$((users * 200))
  for seed in $seeds; do
    local trace="$out/$name-$seed.jsonl"
    "$sim" gen dp --users "$users" --jobs "$jobs" --maps "$maps" --map-s "$map_s" --reduces 1 \
      --reduce-s "$reduce_s" --seed "$seed" -o "$trace"
    local common=(--trace "$trace" --seed "$seed" --horizon "$horizon")
    "$sim" run "${common[@]}" --policy fifo --out "$out/$name-fifo-$seed" >/dev/null
    "$sim" run "${common[@]}" --policy proportional --interval "$interval" "${sets[@]}" "${dp_args[@]}" \
      --out "$out/$name-dp-$seed" >/dev/null
    "$sim" run "${common[@]}" --policy proportional --interval "$interval" --preempt --set "grace_s=$grace" \
      "${sets[@]}" "${dp_args[@]}" --out "$out/$name-dpp-$seed" >/dev/null
  done
  local csv
  csv=$(IFS=,; echo "${rates[*]}")
  # Jobs submitted in the first 80 % of the horizon: every user is still competing.
  local until=$((horizon * 8 / 10))
  for variant in dp dpp; do
    echo "## $name: proportional$([[ $variant == dpp ]] && echo ' with preemption')"
    python3 "$here/fidelity.py" --rates "$csv" --until "$until" --label "$variant" \
      --fifo "$out/$name-fifo-"* --dp "$out/$name-$variant-"*
    echo
  done
  # Throughput cost of preemption: jobs completed per run, with against without.
  python3 - "$out" "$name" <<'PY'
import json, sys, statistics
out, name = sys.argv[1], sys.argv[2]
import glob
def mean(variant, key):
    return statistics.mean(json.load(open(f))[key] for f in glob.glob(f"{out}/{name}-{variant}-*/summary.json"))
done = {v: mean(v, "completed") for v in ("fifo", "dp", "dpp")}
lost = {v: mean(v, "lost_work_s") for v in ("dp", "dpp")}
pre = {v: mean(v, "preemptions") for v in ("dp", "dpp")}
print(f"jobs completed per run: fifo {done['fifo']:.1f}, proportional {done['dp']:.1f}, with preemption {done['dpp']:.1f}")
print(f"preemption: {pre['dpp']:.0f} kills per run, {lost['dpp']:.0f} slot-s lost; completed jobs {100 * (done['dpp'] / done['dp'] - 1):+.2f} % against no preemption")
print()
PY
}

# Which experiments to run (default: all four; EXPERIMENTS="eighty" for Fig. 9 only).
only=${EXPERIMENTS:-"two two-fine ten eighty"}
want() { [[ " $only " == *" $1 "* ]]; }
want two && experiment two 2 320 15 5 7200 10
want two-fine && experiment two-fine 2 1280 3.75 1 7200 10
want ten && experiment ten 10 80 15 5 14400 10
# Fig. 9: 80 users at rates 1..80, jobs of 16 maps (a fifth of the cluster).
want eighty && experiment eighty 80 16 15 5 14400 10
