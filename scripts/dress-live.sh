#!/usr/bin/env bash
# DRESS on a real local cluster: a master and three agents (4 map + 2 reduce slots each,
# 12 map slots) on 127.0.0.1 run the same stream of real wordcount jobs twice, once
# under `dress` (θ = 0.25, so jobs of at most 3 map tasks are small-demand) and once
# under `fifo` (the Capacity Scheduler's default, one FIFO queue). Large jobs have 12 map
# tasks, small ones 2; every map task first sleeps a few seconds so the cluster stays
# congested. Jobs are submitted SPACING seconds apart. Prints one line per job and
# policy (wait and completion in seconds, from the master's own times) and the mean
# completion per class, and writes them to OUT/live.csv (default
# $TMPDIR/slotmarket-dress-live).
#
#   scripts/dress-live.sh                      # debug build
#   PROFILE=release OUT=runs/dress-live scripts/dress-live.sh
#   PAUSE=8 PATTERN="L L L S L S L S L S" scripts/dress-live.sh   # the run in docs/experiments/dress.md
#   KEEP=1 scripts/dress-live.sh               # keep the work directory (logs) afterwards
#
# Needs bash, coreutils and jq. Every process it starts leads its own process group and
# is killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${PROFILE:-debug}
SPACING=${SPACING:-2}
PAUSE=${PAUSE:-4}
PATTERN=${PATTERN:-"L L S L S L S S L S"}
OUT=${OUT:-${TMPDIR:-/tmp}/slotmarket-dress-live}
AGENTS=3

command -v jq >/dev/null || { echo "dress-live: needs jq" >&2; exit 2; }
if [ "$PROFILE" = release ]; then cargo build --release --quiet; else cargo build --quiet; fi
BIN=${CARGO_TARGET_DIR:-$PWD/target}/$PROFILE
WORK=$(mktemp -d -t slotmarket-dress-XXXXXX)
declare -A GROUP=()

stop_all() {
    for name in "${!GROUP[@]}"; do
        kill -KILL -- "-${GROUP[$name]}" 2>/dev/null || true
        wait "${GROUP[$name]}" 2>/dev/null || true
        unset "GROUP[$name]"
    done
}
cleanup() {
    stop_all
    if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK/jobs" "$OUT"
"$BIN/slotmarket" pki init --dir "$WORK/pki" >/dev/null
for n in $(seq "$AGENTS"); do
    "$BIN/slotmarket" pki issue --dir "$WORK/pki" --role agent --name "node-$n" >/dev/null
done
"$BIN/slotmarket" pki issue --dir "$WORK/pki" --role user --name dress >/dev/null
export SLOTMARKET_CERT_DIR=$WORK/pki SLOTMARKET_IDENTITY=dress

INPUT=$WORK/input
for t in 0 1 2 3; do
    "$BIN/slotmarket-task" gen-text --output "$INPUT" --bytes 400000 --seed 3 --task "$t" --tasks 4 >/dev/null 2>&1
done

# A wordcount job of $2 map tasks (each sleeping PAUSE seconds first) and $3 reduces.
job_spec() {
    cat <<SPEC
name = "$1"
input = "$INPUT"
[[stage]]
name = "map"
tasks = $2
slot = "map"
command = "sleep $PAUSE && slotmarket-task wordcount map --input {input} --task {task} --tasks {tasks} --reducers {tasks.reduce} --job-dir {job_dir}"
[[stage]]
name = "reduce"
tasks = $3
slot = "reduce"
after = ["map"]
command = "slotmarket-task wordcount reduce --task {task} --maps {tasks.map} --job-dir {job_dir}"
SPEC
}

# Runs the stream under the [policy] table in $2; appends "policy,name,class,wait,completion" lines.
run_policy() {
    local label=$1 policy=$2 run=$WORK/$1
    mkdir -p "$run"
    printf '%s\n' "$policy" >"$run/master.toml"
    setsid "$BIN/slotmarket-master" --config "$run/master.toml" --listen 127.0.0.1:0 --data-dir "$run/master" \
        --cert-dir "$WORK/pki" 2>>"$run/master.log" &
    GROUP[master]=$!
    for _ in $(seq 200); do [ -s "$run/master/master.addr" ] && break; sleep 0.05; done
    [ -s "$run/master/master.addr" ] || { echo "the master did not start" >&2; cat "$run/master.log" >&2; exit 1; }
    export SLOTMARKET_MASTER=$(cat "$run/master/master.addr")
    for n in $(seq "$AGENTS"); do
        setsid "$BIN/slotmarket-agent" --master "$SLOTMARKET_MASTER" --name "node-$n" --cert-dir "$WORK/pki" \
            --map-slots 4 --reduce-slots 2 --work-dir "$run/agents/node-$n" --data-dir "$run/shared" \
            2>>"$run/node-$n.log" &
        GROUP[agent-$n]=$!
    done
    for _ in $(seq 100); do
        [ "$("$BIN/slotmarket" nodes --json | jq '.nodes | length')" = "$AGENTS" ] && break
        sleep 0.1
    done
    local i=0
    for class in $PATTERN; do
        i=$((i + 1))
        if [ "$class" = L ]; then job_spec "j$i-large" 12 2; else job_spec "j$i-small" 2 1; fi >"$WORK/jobs/j$i.toml"
        "$BIN/slotmarket" submit "$WORK/jobs/j$i.toml" >/dev/null
        sleep "$SPACING"
    done
    for _ in $(seq 600); do
        active=$("$BIN/slotmarket" jobs --json | jq '[.jobs[] | select(.state == "pending" or .state == "running")] | length')
        [ "$active" = 0 ] && break
        sleep 1
    done
    "$BIN/slotmarket" jobs --all --json | jq -r --arg p "$label" '.jobs[]
        | [$p, .name, (if (.name | endswith("small")) then "small" else "large" end), .state,
           ((.started_ms - .submitted_ms) / 1000), ((.finished_ms - .submitted_ms) / 1000)] | @csv' \
        | tr -d '"' >>"$OUT/live.csv"
    # A failed job says why (the first one only, so a broken set-up is visible).
    failed=$("$BIN/slotmarket" jobs --all --json | jq -r '[.jobs[] | select(.state == "failed")][0].id // empty')
    [ -z "$failed" ] || "$BIN/slotmarket" status "$failed" >&2
    stop_all
}

echo "policy,name,class,state,wait_s,completion_s" >"$OUT/live.csv"
run_policy dress $'[policy]\nname = "dress"\ntheta = 0.25\ninterval_secs = 2.0'
run_policy fifo $'[policy]\nname = "fifo"'
column -t -s, "$OUT/live.csv"
awk -F, 'NR > 1 { sum[$1 "," $3] += $6; n[$1 "," $3]++ }
    END { for (k in sum) printf "%s mean completion %.1f s (%d jobs)\n", k, sum[k] / n[k], n[k] }' "$OUT/live.csv" | sort
