#!/usr/bin/env bash
# MRM's §6.3 buyer model on a live local cluster with real task programs (issue 9):
# `slotmarket demo --keep` starts a master with [admission] mode = "mrm" and `edf` and
# three agents (2 map + 1 reduce slots each) and funds the demo user; then
# `slotmarket workload run WORKLOAD --alpha ALPHA` quotes every job and buys its deadline
# (delay-sensitive: the earliest costing at most ALPHA x its processing time; tolerant:
# its processing time, the cheapest deadline), follows the jobs and writes plan.csv,
# jobs.csv, mrm.csv, predictions.csv, mrm.txt and the rest into OUT; then
# scripts/mrm/predicted_plot.py draws OUT/predicted.svg. Stops the cluster at the end.
#
#   scripts/mrm/workload.sh                              # ALPHA=2 SEED=1
#   OUT=docs/experiments/mrm/live ALPHA=2 scripts/mrm/workload.sh
#
# Needs bash, python3 and a build (`cargo build`); BIN overrides where the binaries are.
set -euo pipefail
cd "$(dirname "$0")/../.."
ALPHA=${ALPHA:-2} SEED=${SEED:-1}
WORKLOAD=${WORKLOAD:-configs/workloads/mrm-buyer.toml}
OUT=${OUT:-${TMPDIR:-/tmp}/slotmarket-mrm-workload}
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/debug}
export PATH="$BIN:$PATH"

kept=$(mktemp)
slotmarket demo --keep --json >/dev/null 2>"$kept"
export SLOTMARKET_MASTER=$(sed -n 's/^ *export SLOTMARKET_MASTER=//p' "$kept")
export SLOTMARKET_CERT_DIR=$(sed -n 's/^ *export SLOTMARKET_CERT_DIR=//p' "$kept")
export SLOTMARKET_IDENTITY=demo
stop=$(sed -n 's/^ *kill -TERM -- \(.*\) && rm -rf \(.*\)$/\1/p' "$kept")
root=$(sed -n 's/^ *kill -TERM -- .* && rm -rf \(.*\)$/\1/p' "$kept")
trap 'kill -TERM -- $stop 2>/dev/null || true; sleep 1; rm -rf "$root" "$kept"' EXIT

mkdir -p "$OUT"
uptime | tee "$OUT/uptime.txt"
status=0
slotmarket workload run "$WORKLOAD" --seed "$SEED" --alpha "$ALPHA" --out "$OUT" || status=$?
uptime | tee -a "$OUT/uptime.txt"
[ -f "$OUT/mrm.csv" ] && python3 scripts/mrm/predicted_plot.py "$OUT/mrm.csv" "$OUT/predictions.csv" "$OUT/predicted.svg"
exit "$status"
