#!/usr/bin/env bash
# DP §4 experiments in the simulator: 2 users at 2:1, 10 users at rates 1..10, 80 users at
# rates 1..80, each under fifo, proportional without and with preemption, over seeds.
# Usage: scripts/dp/experiments.sh [OUT_DIR] (default runs/dp); needs a release build of
# slotmarket-sim (cargo build --release -p slotmarket-master --bin slotmarket-sim).
set -euo pipefail
out=${1:-runs/dp}
sim=${SIM:-${CARGO_TARGET_DIR:-target}/release/slotmarket-sim}
seeds=${SEEDS:-"1 2 3 4 5"}
here=$(dirname "$0")
mkdir -p "$out"

# experiment NAME USERS MAPS MAP_S HORIZON_S INTERVAL_S
experiment() {
  local name=$1 users=$2 maps=$3 map_s=$4 horizon=$5 interval=$6
  local rates=() sets=()
  for ((u = 1; u <= users; u++)); do
    local r=$u
    [[ $users == 2 ]] && r=$((3 - u)) # two users: user01 at 2, user02 at 1
    rates+=("$r")
    sets+=(--set "rates.user$(printf %02d "$u")=$r")
  done
  local jobs=$((users * 400))
  for seed in $seeds; do
    local trace="$out/$name-$seed.jsonl"
    "$sim" gen dp --users "$users" --jobs "$jobs" --maps "$maps" --map-s "$map_s" --reduces 1 \
      --reduce-s 5 --seed "$seed" -o "$trace"
    local common=(--trace "$trace" --seed "$seed" --horizon "$horizon")
    "$sim" run "${common[@]}" --policy fifo --out "$out/$name-fifo-$seed" >/dev/null
    "$sim" run "${common[@]}" --policy proportional --interval "$interval" "${sets[@]}" \
      --out "$out/$name-dp-$seed" >/dev/null
    "$sim" run "${common[@]}" --policy proportional --interval "$interval" --preempt "${sets[@]}" \
      --out "$out/$name-dpp-$seed" >/dev/null
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
}

experiment two 2 320 15 7200 10
experiment ten 10 80 15 14400 10
experiment eighty 80 80 15 28800 10
