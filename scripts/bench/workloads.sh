#!/usr/bin/env bash
# Throughput of slotmarket-task's map programs, each run as one single-threaded process on
# generated input (page cache warm), in MB/s (10^6 bytes) per core: input bytes divided by
# the process's CPU time (user + sys). `wc -l` over the same file (read it all into user
# space and scan for newlines) is the baseline, and each program's ratio to it is
# printed, all measured in this one run. CPU time rather than wall time, so builds running
# beside the benchmark on a small machine distort it less.
#
#   scripts/bench/workloads.sh            # 256 MiB of text and 256 MiB of records
#   SIZE_MB=64 RUNS=1 scripts/bench/workloads.sh
#
# Every program's best of RUNS (default 3) is reported. Scratch data lives in a temporary
# directory (TMPDIR) and is removed on exit.
set -euo pipefail

SIZE_MB=${SIZE_MB:-256}
RUNS=${RUNS:-3}
REDUCERS=${REDUCERS:-4}
PI_SAMPLES=${PI_SAMPLES:-100000000}
GREP_PATTERN=${GREP_PATTERN:-kaihem}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
cargo build --release --quiet -p slotmarket-workloads
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin="$target_dir/release/slotmarket-task"

work=$(mktemp -d "${TMPDIR:-/tmp}/slotmarket-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT

bytes=$((SIZE_MB * 1024 * 1024))
records=$((bytes / 100))
echo "generating $SIZE_MB MiB of text and $records records in $work ..."
"$bin" gen-text --output "$work/text" --bytes "$bytes" --seed 1 >/dev/null
"$bin" gen-records --output "$work/records" --records "$records" --seed 1 >/dev/null
text_bytes=$(stat -c %s "$work/text/part-0")
record_bytes=$(stat -c %s "$work/records/part-0")

# Runs a command RUNS times; prints the best "wall cpu" seconds (cpu = user + sys).
best_of() {
    local best_wall="" best_cpu="" line wall user sys cpu
    for _ in $(seq "$RUNS"); do
        rm -rf "$work/job"
        line=$( { TIMEFORMAT='%R %U %S'; time "$@" >/dev/null; } 2>&1 | tail -n 1 )
        read -r wall user sys <<<"$line"
        cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.3f", u + s }')
        if [[ -z $best_cpu ]] || awk -v a="$cpu" -v b="$best_cpu" 'BEGIN { exit !(a < b) }'; then
            best_wall=$wall best_cpu=$cpu
        fi
    done
    echo "$best_wall $best_cpu"
}

# name, bytes, command...: prints one table row; the first row is the baseline.
baseline=""
row() {
    local name=$1 size=$2
    shift 2
    local wall cpu rate ratio
    read -r wall cpu <<<"$(best_of "$@")"
    rate=$(awk -v b="$size" -v c="$cpu" 'BEGIN { printf "%.1f", b / 1e6 / (c > 0 ? c : 1e-3) }')
    if [[ -z $baseline ]]; then baseline=$rate; fi
    ratio=$(awk -v r="$rate" -v b="$baseline" 'BEGIN { printf "%.3f", r / b }')
    printf '%-34s %10.1f %8.3f %8.3f %12s %8s\n' "$name" "$(awk -v b="$size" 'BEGIN { print b / 1e6 }')" "$wall" "$cpu" "$rate" "$ratio"
}

cat "$work/text/part-0" "$work/records/part-0" >/dev/null # warm the page cache
printf '%-34s %10s %8s %8s %12s %8s\n' program input_MB wall_s cpu_s MB/s/core vs_wc
row "wc -l (baseline)" "$text_bytes" wc -l "$work/text/part-0"
row "wordcount map ($REDUCERS reducers)" "$text_bytes" \
    "$bin" wordcount map --input "$work/text" --task 0 --tasks 1 --reducers "$REDUCERS" --job-dir "$work/job"
row "grep map '$GREP_PATTERN'" "$text_bytes" \
    "$bin" grep map --input "$work/text" --pattern "$GREP_PATTERN" --task 0 --tasks 1 --reducers "$REDUCERS" --job-dir "$work/job"
row "sort map ($REDUCERS reducers)" "$record_bytes" \
    "$bin" sort map --input "$work/records" --task 0 --tasks 1 --reducers "$REDUCERS" --job-dir "$work/job"
row "gen-text" "$text_bytes" "$bin" gen-text --output "$work/job/gen" --bytes "$bytes"
row "gen-records" "$record_bytes" "$bin" gen-records --output "$work/job/gen" --records "$records"

read -r wall cpu <<<"$(best_of "$bin" pi map --samples "$PI_SAMPLES" --task 0 --job-dir "$work/job")"
awk -v n="$PI_SAMPLES" -v c="$cpu" -v w="$wall" \
    'BEGIN { printf "pi map: %d samples in %.3f s wall, %.3f s cpu: %.1f M samples/s/core\n", n, w, c, n / 1e6 / (c > 0 ? c : 1e-3) }'
