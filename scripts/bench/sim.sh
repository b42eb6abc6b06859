#!/usr/bin/env bash
# Simulator scale benchmark (issue 3): JOBS jobs (default 500,000) of MRM's Table 1 mix,
# Poisson arrivals every 50 s on average, through fifo and fair on MRM's cluster (40 nodes
# × 2 map + 2 reduce slots). For each policy it prints the wall time of the whole run
# (loading the trace included), the process's CPU time (user + sys: what a busy machine
# distorts least), jobs simulated per second by both, and peak resident memory. Issue
# 14's goal: 500,000 jobs in at most 10 s (50,000 jobs/s) and at most 1 GiB on a 2-core
# machine (issue 3's first targets were 60 s and 2 GiB).
#
#   scripts/bench/sim.sh                       # 500,000 jobs
#   JOBS=50000 scripts/bench/sim.sh            # quicker
#   POLICIES="fifo fair priority" scripts/bench/sim.sh
#   THREADS="1 2" scripts/bench/sim.sh         # each policy on one thread and on two
#
# THREADS lists the `--threads` values to run each policy with (default "1 N", N the
# machine's cores): one row each, side by side, and the summaries compared (they must be
# the same, byte for byte).
#
# The trace is generated once (seed 1) into a temporary directory, removed on exit.
set -euo pipefail

JOBS=${JOBS:-500000}
POLICIES=${POLICIES:-fifo fair}
INTERARRIVAL=${INTERARRIVAL:-50}
THREADS=${THREADS:-1 $(nproc)}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
cargo build --release --quiet -p slotmarket-master --bin slotmarket-sim
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin="$target_dir/release/slotmarket-sim"

work=$(mktemp -d "${TMPDIR:-/tmp}/slotmarket-sim-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

start=$(date +%s.%N)
"$bin" gen mrm --jobs "$JOBS" --interarrival "$INTERARRIVAL" --seed 1 -o "$work/trace.jsonl"
gen_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
printf 'trace: %d jobs of the MRM mix, %s MB, generated in %.1f s\n' "$JOBS" \
    "$(( $(stat -c %s "$work/trace.jsonl") / 1000000 ))" "$gen_s"
printf '%-8s %7s %9s %9s %12s %12s %10s %12s\n' policy threads wall_s cpu_s jobs/s_wall jobs/s_cpu peak_MiB makespan_s

for policy in $POLICIES; do
    for threads in $THREADS; do
        timing="$work/$policy.time"
        if [ -x /usr/bin/time ]; then
            /usr/bin/time -f '%e %U %S %M' -o "$timing" \
                "$bin" run --trace "$work/trace.jsonl" --policy "$policy" --seed 1 --threads "$threads" --json >"$work/$policy.$threads.json"
            read -r wall user sys rss_kib <"$timing"
        else
            # Without GNU time: wall time from date, CPU time unknown, peak RSS from --timing.
            start=$(date +%s.%N)
            "$bin" run --trace "$work/trace.jsonl" --policy "$policy" --seed 1 --threads "$threads" --json --timing \
                >"$work/$policy.$threads.json" 2>"$timing"
            wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
            user=0 sys=0
            rss_kib=$(( $(sed -n 's/.*peak RSS \([0-9]*\) MiB.*/\1/p' "$timing") * 1024 ))
        fi
        makespan=$(sed -n 's/^  "makespan_s": \([0-9.]*\),$/\1/p' "$work/$policy.$threads.json")
        awk -v p="$policy" -v t="$threads" -v jobs="$JOBS" -v wall="$wall" -v user="$user" -v sys="$sys" \
            -v rss="$rss_kib" -v makespan="$makespan" 'BEGIN {
                cpu = user + sys
                printf "%-8s %7s %9.1f %9.1f %12.0f %12.0f %10.0f %12s\n", p, t, wall, cpu, jobs / wall,
                    (cpu > 0 ? jobs / cpu : 0), rss / 1024, makespan
            }'
        first=$(set -- $THREADS; echo "$1")
        if ! cmp -s "$work/$policy.$first.json" "$work/$policy.$threads.json"; then
            echo "$policy: the summary on $threads threads differs from the one on $first" >&2
            exit 1
        fi
    done
done
