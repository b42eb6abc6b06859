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
# whether the deadline was met. SPARE=false caps the deadline job at its guarantee (no
# spare tokens); UTILITY gives the deadline run its own utility curve (the job spec's
# `utility`, points of minutes after the deadline and utility) instead of the policy's.
# PRESET=tuned starts the policy from that preset, with its all-in margin (180 s at the
# paper's scale) brought down to INTERVAL seconds as the dead zone is.
#
#   scripts/jockey-live.sh                          # debug build, results in $TMPDIR/slotmarket-jockey-live
#   OUT=docs/experiments/jockey/live SPARE=false scripts/jockey-live.sh
#   OUT=docs/experiments/jockey/live-spare scripts/jockey-live.sh
#   OUT=docs/experiments/jockey/live-utility UTILITY='[[0, 1], [0.5, 1], [1.5, -1]]' scripts/jockey-live.sh
#   OUT=docs/experiments/jockey/live-tuned PRESET=tuned scripts/jockey-live.sh
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
SPARE=${SPARE:-true}
UTILITY=${UTILITY:-}
PRESET=${PRESET:-}
OUT=${OUT:-${TMPDIR:-/tmp}/slotmarket-jockey-live}
AGENTS=2

NAME=jockey-live
source scripts/lib/local-cluster.sh
mkdir -p "$OUT"
cluster_pki user:analyst
export SLOTMARKET_IDENTITY=analyst

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

preset_lines=""
if [[ -n $PRESET ]]; then
    preset_lines="preset = \"$PRESET\"
all_in_within_s = $INTERVAL"
fi
cluster_start "$WORK" "[policy]
name = \"jockey\"
interval_s = $INTERVAL
dead_zone_s = $INTERVAL
spare = $SPARE
$preset_lines"

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
slo_lines="deadline = \"+${DEADLINE}s\""
[ -n "$UTILITY" ] && slo_lines+=$'\n'"utility = $UTILITY"
job_spec slo-wordcount "$MAPS" "$slo_lines" "$SLOW_PAUSE" >"$WORK/jobs/slo.toml"
slo=$("$BIN/slotmarket" submit "$WORK/jobs/slo.toml")
start=$(date +%s%N)
echo "t_s,guarantee,running,progress,predicted_finish_s,deadline_s" >"$OUT/timeline.csv"
while :; do
    status=$("$BIN/slotmarket" status "$slo" --json)
    state=$(jq -r '.state' <<<"$status")
    now=$(date +%s%N)
    jq -r --arg t "$(((now - start) / 1000000000))" --arg d "$DEADLINE" \
        'select(.slo != null) | [($t | tonumber | floor), .slo.guaranteed, .tasks_running,
          (.slo.progress_permille / 1000),
          (if .slo.predicted_finish == null then "" else (.slo.predicted_finish - .submitted_ms) / 1000 | floor end),
          ($d | tonumber)] | @csv' <<<"$status" | tr -d '"' >>"$OUT/timeline.csv"
    case $state in completed | failed | cancelled) break ;; esac
    sleep 1
done
"$BIN/slotmarket" status "$slo" >&2
took=$("$BIN/slotmarket" status "$slo" --json | jq '(.finished_ms - .submitted_ms) / 1000')
met=$(awk -v t="$took" -v d="$DEADLINE" 'BEGIN { print (t <= d) ? 1 : 0 }')
echo "deadline run $slo: $state in ${took}s against a deadline of ${DEADLINE}s ($([ "$met" = 1 ] && echo met || echo missed))"
if [ -n "$UTILITY" ]; then
    # The finish's utility under the job's own curve (flat before the first point and
    # after the last), as the policy's Utility::at computes it.
    late_min=$(awk -v t="$took" -v d="$DEADLINE" 'BEGIN { print (t - d) / 60 }')
    worth=$(jq -r '.[] | "\(.[0]) \(.[1])"' <<<"$UTILITY" | awk -v x="$late_min" '
        { t[NR] = $1; u[NR] = $2 }
        END {
            if (x <= t[1]) { print u[1]; exit }
            for (i = 2; i <= NR; i++) if (x <= t[i]) {
                print (t[i] == t[i-1]) ? u[i] : u[i-1] + (u[i] - u[i-1]) * (x - t[i-1]) / (t[i] - t[i-1]); exit
            }
            print u[NR]
        }')
    echo "its own utility curve $UTILITY (minutes after the deadline): $worth at ${late_min} min"
fi
"$BIN/slotmarket-sim" plot-allocation "$OUT/timeline.csv" -o "$OUT/allocation.svg" \
    --title "live: slo-wordcount, $MAPS maps, deadline ${DEADLINE}s${UTILITY:+, own utility}, beside best-effort jobs$([ "$SPARE" = true ] || echo ', no spare tokens')"
echo "timeline: $OUT/timeline.csv, plot: $OUT/allocation.svg"
