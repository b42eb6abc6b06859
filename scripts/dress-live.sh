#!/usr/bin/env bash
# DRESS on a real local cluster: a master and three agents (4 map + 2 reduce slots each,
# 12 map slots) on 127.0.0.1 run the same stream of real jobs twice, once under `dress`
# (θ = 0.25, so jobs of at most 3 map tasks are small-demand) and once under `capacity`
# with its default configuration (the jobs name no queue, so one FIFO queue: the
# Capacity Scheduler as Hadoop ships it, the paper's baseline). PATTERN lists the jobs in
# submission order: L a large wordcount, T a large sort (LARGE_MAPS map tasks, default 12,
# and 2 reduces each), S a small wordcount, s a small sort (2 maps, 1 reduce). Every map task first sleeps
# PAUSE seconds so the cluster stays congested. Jobs are submitted SPACING seconds apart.
# Prints one line per job and policy (wait and completion in seconds, from the master's
# own times; the class the master's policy reported), the mean completion per class and
# the machine's load average, and writes OUT/live.csv (default
# $TMPDIR/slotmarket-dress-live) and, with python3, the per-job plot OUT/live.svg.
#
#   scripts/dress-live.sh                      # debug build
#   PROFILE=release OUT=runs/dress-live scripts/dress-live.sh
#   PAUSE=8 PATTERN="L T L S s T S s L S s S" OUT=docs/experiments/dress scripts/dress-live.sh
#                                              # the run in docs/experiments/dress.md
#   KEEP=1 scripts/dress-live.sh               # keep the work directory (logs) afterwards
#
# Needs bash, coreutils and jq. Every process it starts leads its own process group and
# is killed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${PROFILE:-debug}
SPACING=${SPACING:-2}
PAUSE=${PAUSE:-4}
LARGE_MAPS=${LARGE_MAPS:-12}
PATTERN=${PATTERN:-"L T S L s T S s L S"}
OUT=${OUT:-${TMPDIR:-/tmp}/slotmarket-dress-live}
AGENTS=3

NAME=dress-live
source scripts/lib/local-cluster.sh
mkdir -p "$OUT"
cluster_pki user:dress
export SLOTMARKET_IDENTITY=dress

INPUT=$WORK/input
RECORDS=$WORK/records
for t in 0 1 2 3; do
    "$BIN/slotmarket-task" gen-text --output "$INPUT" --bytes 400000 --seed 3 --task "$t" --tasks 4 >/dev/null 2>&1
    "$BIN/slotmarket-task" gen-records --output "$RECORDS" --records 40000 --seed 3 --task "$t" --tasks 4 >/dev/null 2>&1
done

# A wordcount job of $2 map tasks (each sleeping PAUSE seconds first) and $3 reduces.
wordcount_spec() {
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

# A sort job over the 4 MB of records: $2 map tasks (each sleeping PAUSE seconds first),
# $3 range-partitioned reduces.
sort_spec() {
    cat <<SPEC
name = "$1"
input = "$RECORDS"
[[stage]]
name = "map"
tasks = $2
slot = "map"
command = "sleep $PAUSE && slotmarket-task sort map --input {input} --parts 4 --task {task} --tasks {tasks} --reducers {tasks.reduce} --job-dir {job_dir}"
[[stage]]
name = "reduce"
tasks = $3
slot = "reduce"
after = ["map"]
command = "slotmarket-task sort reduce --task {task} --maps {tasks.map} --job-dir {job_dir}"
SPEC
}

# The spec of job $1 of kind $2 (a PATTERN letter).
job_spec() {
    case $2 in
        L) wordcount_spec "j$1-large-wordcount" "$LARGE_MAPS" 2 ;;
        T) sort_spec "j$1-large-sort" "$LARGE_MAPS" 2 ;;
        S) wordcount_spec "j$1-small-wordcount" 2 1 ;;
        s) sort_spec "j$1-small-sort" 2 1 ;;
        *) echo "dress-live: unknown job kind '$2' in PATTERN (use L, T, S or s)" >&2; exit 2 ;;
    esac
}

# Runs the stream under the [policy] table in $2; appends
# "policy,name,class,policy_class,state,wait,completion" lines.
run_policy() {
    local label=$1 policy=$2 run=$WORK/$1
    cluster_start "$run" "$policy"
    local i=0
    for kind in $PATTERN; do
        i=$((i + 1))
        job_spec "$i" "$kind" >"$WORK/jobs/j$i.toml"
        "$BIN/slotmarket" submit "$WORK/jobs/j$i.toml" >/dev/null
        sleep "$SPACING"
    done
    for _ in $(seq 600); do
        active=$("$BIN/slotmarket" jobs --json | jq '[.jobs[] | select(.state == "pending" or .state == "running")] | length')
        [ "$active" = 0 ] && break
        sleep 1
    done
    # The master keeps ended jobs (and under dress their class) for its retention, so the
    # class it reported is read back here beside the one the job was built as.
    "$BIN/slotmarket" jobs --all --json | jq -r --arg p "$label" '.jobs[]
        | [$p, .name, (if (.name | contains("-small-")) then "small" else "large" end),
           (.demand_class // "-"), .state,
           ((.started_ms - .submitted_ms) / 1000), ((.finished_ms - .submitted_ms) / 1000)] | @csv' \
        | tr -d '"' >>"$OUT/live.csv"
    # A failed job says why (the first one only, so a broken set-up is visible).
    failed=$("$BIN/slotmarket" jobs --all --json | jq -r '[.jobs[] | select(.state == "failed")][0].id // empty')
    [ -z "$failed" ] || "$BIN/slotmarket" status "$failed" >&2
    stop_all
}

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "policy,name,class,policy_class,state,wait_s,completion_s" >"$OUT/live.csv"
echo "load average (1, 5, 15 min) before dress: $(load)"
run_policy dress $'[policy]\nname = "dress"\ntheta = 0.25\ninterval_secs = 2.0'
echo "load average before capacity: $(load)"
run_policy capacity $'[policy]\nname = "capacity"'
echo "load average at the end: $(load)"
column -t -s, "$OUT/live.csv"
if command -v python3 >/dev/null; then
    python3 scripts/dress-live-plot.py "$OUT/live.csv" -o "$OUT/live.svg" && echo "plot: $OUT/live.svg"
fi
awk -F, 'NR > 1 { sum[$1 "," $3] += $7; n[$1 "," $3]++ }
    END { for (k in sum) printf "%s mean completion %.1f s (%d jobs)\n", k, sum[k] / n[k], n[k] }' "$OUT/live.csv" | sort
