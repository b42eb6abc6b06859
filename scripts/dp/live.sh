#!/usr/bin/env bash
# DP on a real local cluster: a master under `proportional` (interval INTERVAL s,
# preemption on, grace 0) and three agents (4 map + 2 reduce slots each, 12 map slots)
# on 127.0.0.1. Two accounts, alice at rate 1 and bob at rate 2, each run a closed-loop
# stream of real wordcount jobs (MAPS maps, default 12, that first sleep PAUSE s; the
# policy's compensation_s is COMPENSATION, default 0); at BOOST_AT s alice
# raises her rate to 4. `slotmarket price --json` is sampled every second into
# OUT/slots.csv (t_s, account, rate, share_map, used_map, pending_map) and
# scripts/dp/live_plot.py draws OUT/slots.svg.
#
#   scripts/dp/live.sh                              # debug build, 150 s
#   OUT=docs/experiments/dp DURATION=150 scripts/dp/live.sh
#
# Needs bash, coreutils, jq and python3. Every process it starts leads its own process
# group and is killed on exit.
set -euo pipefail
cd "$(dirname "$0")/../.."

PROFILE=${PROFILE:-debug}
INTERVAL=${INTERVAL:-5}
PAUSE=${PAUSE:-6}
DURATION=${DURATION:-150}
BOOST_AT=${BOOST_AT:-75}
MAPS=${MAPS:-12}
COMPENSATION=${COMPENSATION:-0}
OUT=${OUT:-${TMPDIR:-/tmp}/slotmarket-dp-live}
AGENTS=3

NAME=dp-live
source scripts/lib/local-cluster.sh
mkdir -p "$OUT"
cluster_pki user:alice user:bob admin:root

INPUT=$WORK/input
for t in 0 1 2 3; do
    "$BIN/slotmarket-task" gen-text --output "$INPUT" --bytes 200000 --seed 3 --task "$t" --tasks 4 >/dev/null 2>&1
done
job_spec() {
    cat <<SPEC
name = "$1"
input = "$INPUT"
[[stage]]
name = "map"
tasks = $MAPS
slot = "map"
command = "sleep $PAUSE && slotmarket-task wordcount map --input {input} --task {task} --tasks {tasks} --reducers {tasks.reduce} --job-dir {job_dir}"
[[stage]]
name = "reduce"
tasks = 1
slot = "reduce"
after = ["map"]
command = "slotmarket-task wordcount reduce --task {task} --maps {tasks.map} --job-dir {job_dir}"
SPEC
}

cluster_start "$WORK" "[policy]
name = \"proportional\"
interval_s = $INTERVAL
preemption = true
compensation_s = $COMPENSATION
[policy.rates]
alice = 1
bob = 2" root

# Created accounts are metered (and shown to the admin by `price`); budgets are ample.
for who in alice bob; do SLOTMARKET_IDENTITY=root "$BIN/slotmarket" account add "$who" --budget 1000 >/dev/null; done

# A closed-loop stream: submit, wait for the end, submit the next.
stream() {
    local who=$1 i=0
    while true; do
        i=$((i + 1))
        job_spec "$who-$i" >"$WORK/jobs/$who-$i.toml"
        SLOTMARKET_IDENTITY=$who "$BIN/slotmarket" submit "$WORK/jobs/$who-$i.toml" --wait >/dev/null 2>&1 || sleep 1
    done
}
for who in alice bob; do
    setsid bash -c "$(declare -f stream job_spec); BIN='$BIN' WORK='$WORK' INPUT='$INPUT' PAUSE='$PAUSE' MAPS='$MAPS' stream $who" &
    GROUP[stream-$who]=$!
done

echo "t_s,account,rate,share_map,used_map,pending_map" >"$OUT/slots.csv"
start=$(date +%s)
boosted=0
while true; do
    now=$(date +%s.%N)
    t=$(awk -v a="$now" -v b="$start" 'BEGIN { printf "%.1f", a - b }')
    awk -v t="$t" -v d="$DURATION" 'BEGIN { exit !(t >= d) }' && break
    if [ "$boosted" = 0 ] && awk -v t="$t" -v b="$BOOST_AT" 'BEGIN { exit !(t >= b) }'; then
        SLOTMARKET_IDENTITY=alice "$BIN/slotmarket" rate set 4 >/dev/null
        echo "$t,boost,alice rate 1 -> 4,,," >>"$OUT/slots.csv"
        boosted=1
    fi
    SLOTMARKET_IDENTITY=root "$BIN/slotmarket" price --json 2>/dev/null | jq -r --arg t "$t" \
        '.accounts[] | [$t, .account, .rate, .share[0], .used[0], .pending[0]] | @csv' | tr -d '"' >>"$OUT/slots.csv" || true
    sleep 1
done
SLOTMARKET_IDENTITY=root "$BIN/slotmarket" jobs --all --json | jq -r '.jobs[]
    | [.name, .state, ((.finished_ms // 0) - .submitted_ms) / 1000] | @csv' | tr -d '"' >"$OUT/jobs.csv"
python3 scripts/dp/live_plot.py "$OUT/slots.csv" "$OUT/slots.svg"
echo "wrote $OUT/slots.csv, $OUT/jobs.csv and $OUT/slots.svg"
