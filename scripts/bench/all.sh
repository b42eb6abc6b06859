#!/usr/bin/env bash
# Every benchmark in one run, then one table: each figure beside its reference measured in
# the same run (or, where nothing comparable runs here, the issue's goal), and the ratio.
# Each benchmark's own output is kept in the log directory printed at the end.
#
#   scripts/bench/all.sh                          # release build, full sizes (several minutes)
#   QUICK=1 scripts/bench/all.sh                  # smaller runs of each, for a first look
#   ONLY="cli launch" scripts/bench/all.sh        # a subset: cli launch sim quote workloads shuffle
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"

ONLY=${ONLY:-cli launch sim quote workloads shuffle}
logs=$(mktemp -d "${TMPDIR:-/tmp}/slotmarket-bench-all.XXXXXX")
if [ -n "${QUICK:-}" ]; then
    export TIMES=${TIMES:-20} SUBMITS=${SUBMITS:-10} BATCH=${BATCH:-1000}
    export TRUE_TASKS=${TRUE_TASKS:-300} SLEEP_TASKS=${SLEEP_TASKS:-48}
    export JOBS=${JOBS:-50000} SIZE_MB=${SIZE_MB:-64}
fi
export POLICIES=${POLICIES:-fifo}

load() { uptime | sed 's/.*load average: //'; }
echo "slotmarket benchmarks: $(nproc) cores, load $(load); logs in $logs"

# Runs one benchmark script, keeping its output; a failing benchmark is reported, not fatal.
run() { # name script [env...]
    local name=$1 script=$2
    shift 2
    echo "== $name (load $(load))"
    if env "$@" "scripts/bench/$script" >"$logs/$name.log" 2>&1; then
        sed 's/^/   /' "$logs/$name.log" | grep -v '^   RESULT' || true
    else
        echo "   $name failed; see $logs/$name.log"
    fi
}

for bench in $ONLY; do
    case $bench in
        cli) run cli cli.sh KEEP_OUTPUT=1 ;;
        launch) run launch launch.sh ;;
        sim) run sim sim.sh ;;
        quote) run quote quote.sh ;;
        workloads) run workloads workloads.sh ;;
        shuffle) run shuffle shuffle.sh ;;
        *) echo "unknown benchmark $bench (cli launch sim quote workloads shuffle)" >&2 ;;
    esac
done

# `row what figure unit reference_figure reference_label`: the ratio is figure / reference.
rows=()
row() { [ -n "$2" ] && [ -n "$4" ] && rows+=("$1|$2|$3|$4|$5"); }
result() { sed -n "s/^RESULT $2 //p" "$logs/$1.log" 2>/dev/null | head -1; }

if [ -f "$logs/cli.log" ]; then
    start=$(result cli start_ms)
    row "nodes round trip p50" "$(result cli nodes_ms)" ms "$start" "process start (--version)"
    row "submit --wait, one true task, p50" "$(result cli wait_ms)" ms "$start" "process start (--version)"
    row "8 parallel CLIs of one spec, jobs/s" "$(result cli parallel_jobs_s)" jobs/s 500 "goal"
    row "the same, no agent (submission only), jobs/s" "$(result cli parallel_no_agent_jobs_s)" jobs/s 500 "goal"
    batch=$(result cli batch_jobs_s)
    if [ "$batch" != - ]; then
        row "one submit of many specs, jobs/s" "$batch" jobs/s 2000 "goal"
        row "8 parallel CLIs of many specs, jobs/s" "$(result cli parallel_batch_jobs_s)" jobs/s 500 "goal"
    fi
fi
if [ -f "$logs/launch.log" ]; then
    # "true  1000 tasks  slotmarket   1.256 s (...)  xargs -P8   0.606 s (...)  ratio ..."
    times() { sed -nE "s/^$1 .*slotmarket +([0-9.]+) s .*xargs -P[0-9]+ +([0-9.]+) s .*/\1 \2/p" "$logs/launch.log"; }
    read -r sm xa < <(times true) || true
    row "true tasks on 8 slots, s" "${sm:-}" s "${xa:-}" "xargs -P 8"
    read -r sm xa < <(times 'sleep 0\.5') || true
    row "sleep 0.5 tasks on 8 slots, s" "${sm:-}" s "${xa:-}" "xargs -P 8"
fi
if [ -f "$logs/sim.log" ]; then
    # "policy threads wall_s cpu_s jobs/s_wall ...": one row per thread count.
    while read -r policy threads rate; do
        row "simulator ($policy, $threads threads), jobs/s wall" "$rate" jobs/s 50000 "goal"
    done < <(awk '$1 == "fifo" { print $1, $2, $5 }' "$logs/sim.log")
fi
if [ -f "$logs/quote.log" ]; then
    q=$(sed -n 's/^admitted=10000 .*per_quote_ms=\([0-9.]*\).*/\1/p' "$logs/quote.log")
    row "MRM quote vs 10,000 admitted, ms" "$q" ms 5 "goal"
fi
if [ -f "$logs/workloads.log" ]; then
    # Table rows: "NAME (may hold spaces) input_MB wall_s cpu_s MB/s/core vs_wc".
    per_row() { awk 'NF >= 6 && $(NF-1) ~ /^[0-9.]+$/ && $NF ~ /^[0-9.]+$/ {
        name = $1; for (i = 2; i <= NF - 5; i++) name = name " " $i; print name "|" $(NF-1) }' "$logs/workloads.log"; }
    wc_rate=$(per_row | sed -n 's/^`\{0,1\}wc -l.*|//p' | head -1)
    while IFS='|' read -r name mbps; do
        case $name in wc*|'`wc'*) continue ;; esac
        row "$name, MB/s per core" "$mbps" MB/s "$wc_rate" "wc -l"
    done < <(per_row)
fi
if [ -f "$logs/shuffle.log" ]; then
    row "shuffle fetch, two agents on loopback, MB/s" "$(result shuffle shuffle_mb_s)" MB/s "$(result shuffle cat_mb_s)" "cat of the same files"
fi

echo
echo "summary (load at the end $(load)):"
printf '%-40s %12s %8s  %12s  %-26s %8s\n' what figure unit reference "" ratio
for r in "${rows[@]}"; do
    IFS='|' read -r what figure unit ref label <<<"$r"
    ratio=$(awk -v f="$figure" -v r="$ref" 'BEGIN { if (r + 0 > 0) printf "%.3f", f / r; else print "-" }')
    printf '%-40s %12s %8s  %12s  %-26s %8s\n' "$what" "$figure" "$unit" "$ref" "$label" "$ratio"
done
echo "logs: $logs"
