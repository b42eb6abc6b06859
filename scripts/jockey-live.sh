#!/usr/bin/env bash
# Jockey on a real local cluster: a master under `jockey` (control step every INTERVAL
# seconds) and two agents (4 map + 2 reduce slots each) on 127.0.0.1. A wordcount job
# named "slo-wordcount" (MAPS map tasks that each sleep PAUSE seconds first, 2 reduces)
# runs once alone to leave its profile, then again under a deadline of DEADLINE seconds,
# its maps sleeping SLOW_PAUSE seconds instead (a run slower than its profile), while
# best-effort wordcount jobs (12 maps each) arrive every SPACING seconds and keep
# the cluster full. Every second the script records the deadline job's guaranteed slots,
# running tasks and progress from `slotmarket status --json` into OUT/timeline.csv, then
# draws OUT/allocation.svg (Fig. 6) with `slotmarket-sim plot-allocation` and prints
# whether the deadline was met.
#
#   scripts/jockey-live.sh                          # debug build, results in $TMPDIR/slotmarket-jockey-live
#   OUT=docs/experiments/jockey/live scripts/jockey-live.sh
#   KEEP=1 scripts/jockey-live.sh                   # keep the work directory (logs) afterwards
#
# Needs bash, coreutils and jq. Every process it starts leads its own process group and
# is killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${PROFILE:-debug}
INTERVAL=${INTERVAL:-2}
PAUSE=${PAUSE:-3}
SLOW_PAUSE=${SLOW_PAUSE:-6}
MAPS=${MAPS:-24}
DEADLINE=${DEADLINE:-45}
SPACING=${SPACING:-4}
BACKGROUND=${BACKGROUND:-12}
OUT=${OUT:-${TMPDIR:-/tmp}/slotmarket-jockey-live}
AGENTS=2

command -v jq >/dev/null || { echo "jockey-live: needs jq" >&2; exit 2; }
if [ "$PROFILE" = release ]; then cargo build --release --quiet; else cargo build --quiet; fi
BIN=${CARGO_TARGET_DIR:-$PWD/target}/$PROFILE
WORK=$(mktemp -d -t slotmarket-jockey-XXXXXX)
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
"$BIN/slotmarket" pki issue --dir "$WORK/pki" --role user --name analyst >/dev/null
export SLOTMARKET_CERT_DIR=$WORK/pki SLOTMARKET_IDENTITY=analyst

INPUT=$WORK/input
for t in 0 1 2 3; do
    "$BIN/slotmarket-task" gen-text --output "$INPUT" --bytes 400000 --seed 3 --task "$t" --tasks 4 >/dev/null 2>&1
done

# A wordcount job named $1 of $2 map tasks (each sleeping $4 seconds, default PAUSE,
# first), 2 reduces, with the deadline line $3 (may be empty).
job_spec() {
    cat <<SPEC
name = "$1"
input = "$INPUT"
$3
[[stage]]
name = "map"
tasks = $2
slot = "map"
command = "sleep ${4:-$PAUSE} && slotmarket-task wordcount map --input {input} --task {task} --tasks {tasks} --reducers {tasks.reduce} --job-dir {job_dir}"
[[stage]]
name = "reduce"
tasks = 2
slot = "reduce"
after = ["map"]
command = "slotmarket-task wordcount reduce --task {task} --maps {tasks.map} --job-dir {job_dir}"
SPEC
}

wait_done() {
    for _ in $(seq 600); do
        state=$("$BIN/slotmarket" status "$1" --json | jq -r '.state')
        case $state in completed | failed | cancelled) echo "$state"; return ;; esac
        sleep 0.5
    done
    echo timeout
}

cat >"$WORK/master.toml" <<TOML
[policy]
name = "jockey"
interval_s = $INTERVAL
dead_zone_s = $INTERVAL
TOML
setsid "$BIN/slotmarket-master" --config "$WORK/master.toml" --listen 127.0.0.1:0 --data-dir "$WORK/master" \
    --cert-dir "$WORK/pki" 2>>"$WORK/master.log" &
GROUP[master]=$!
for _ in $(seq 200); do [ -s "$WORK/master/master.addr" ] && break; sleep 0.05; done
[ -s "$WORK/master/master.addr" ] || { echo "the master did not start" >&2; cat "$WORK/master.log" >&2; exit 1; }
export SLOTMARKET_MASTER=$(cat "$WORK/master/master.addr")
for n in $(seq "$AGENTS"); do
    setsid "$BIN/slotmarket-agent" --master "$SLOTMARKET_MASTER" --name "node-$n" --cert-dir "$WORK/pki" \
        --map-slots 4 --reduce-slots 2 --work-dir "$WORK/agents/node-$n" --data-dir "$WORK/shared" \
        2>>"$WORK/node-$n.log" &
    GROUP[agent-$n]=$!
done
for _ in $(seq 100); do
    [ "$("$BIN/slotmarket" nodes --json | jq '.nodes | length')" = "$AGENTS" ] && break
    sleep 0.1
done

# The profiling run, alone.
job_spec slo-wordcount "$MAPS" "" >"$WORK/jobs/profile.toml"
first=$("$BIN/slotmarket" submit "$WORK/jobs/profile.toml")
echo "profiling run $first: $(wait_done "$first")"
"$BIN/slotmarket" profile slo-wordcount

# Best-effort work, then the deadline run amid it.
submit_background() {
    for i in $(seq "$BACKGROUND"); do
        job_spec "be-$i" 12 "" >"$WORK/jobs/be-$i.toml"
        "$BIN/slotmarket" submit "$WORK/jobs/be-$i.toml" >/dev/null
        sleep "$SPACING"
    done
}
submit_background &
GROUP[background]=$!
sleep "$SPACING"
job_spec slo-wordcount "$MAPS" "deadline = \"+${DEADLINE}s\"" "$SLOW_PAUSE" >"$WORK/jobs/slo.toml"
slo=$("$BIN/slotmarket" submit "$WORK/jobs/slo.toml")
start=$(date +%s%N)
echo "t_s,guarantee,running,progress,predicted_finish_s,deadline_s" >"$OUT/timeline.csv"
while :; do
    status=$("$BIN/slotmarket" status "$slo" --json)
    state=$(jq -r '.state' <<<"$status")
    now=$(date +%s%N)
    jq -r --arg t "$(((now - start) / 1000000000))" --arg d "$DEADLINE" \
        'select(.slo != null) | [($t | tonumber | floor), .slo.guaranteed, .tasks_running,
          (.slo.progress_permille / 1000), "", ($d | tonumber)] | @csv' <<<"$status" | tr -d '"' >>"$OUT/timeline.csv"
    case $state in completed | failed | cancelled) break ;; esac
    sleep 1
done
"$BIN/slotmarket" status "$slo" >&2
took=$("$BIN/slotmarket" status "$slo" --json | jq '(.finished_ms - .submitted_ms) / 1000')
met=$(awk -v t="$took" -v d="$DEADLINE" 'BEGIN { print (t <= d) ? 1 : 0 }')
echo "deadline run $slo: $state in ${took}s against a deadline of ${DEADLINE}s ($([ "$met" = 1 ] && echo met || echo missed))"
"$BIN/slotmarket-sim" plot-allocation "$OUT/timeline.csv" -o "$OUT/allocation.svg" \
    --title "live: slo-wordcount, $MAPS maps, deadline ${DEADLINE}s, beside best-effort jobs"
echo "timeline: $OUT/timeline.csv, plot: $OUT/allocation.svg"
