#!/usr/bin/env bash
# Shuffle throughput: one agent fetching FILES parts (SIZE_MB MiB in all) from another
# agent's shuffle service on loopback (QUIC, mutual TLS, up to MAX_FETCHES at a time,
# the agent's real fetch path with the master's answer given), against `cat` copying the
# same files on the same disk, both with a warm page cache. Prints both rates (MB/s,
# 10^6 bytes) side by side and their ratio, best of RUNS each.
#
#   scripts/bench/shuffle.sh                        # 8 files, 512 MiB, release build
#   SIZE_MB=64 RUNS=1 scripts/bench/shuffle.sh      # quick look
#   PROFILE=debug scripts/bench/shuffle.sh          # without a release build
#
# Scratch data lives in a temporary directory (TMPDIR) and is removed on exit.
set -euo pipefail

SIZE_MB=${SIZE_MB:-512}
FILES=${FILES:-8}
RUNS=${RUNS:-3}
MAX_FETCHES=${MAX_FETCHES:-8}
PROFILE=${PROFILE:-release}

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
if [ "$PROFILE" = release ]; then
    cargo build --release --quiet -p slotmarket-agent --example shuffle_bench
else
    cargo build --quiet -p slotmarket-agent --example shuffle_bench
fi
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bench="$target_dir/$PROFILE/examples/shuffle_bench"

work=$(mktemp -d "${TMPDIR:-/tmp}/slotmarket-shuffle-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
per_file=$((SIZE_MB * 1024 * 1024 / FILES))
echo "writing $FILES files of $per_file bytes in $work ..."
for i in $(seq 0 $((FILES - 1))); do
    head -c "$per_file" /dev/urandom >"$work/src/part-$i"
done
bytes=$((per_file * FILES))
cat "$work"/src/* >/dev/null # warm the page cache for both

now() { date +%s.%N; }
best_shuffle=
best_cat=
for run in $(seq 1 "$RUNS"); do
    rm -rf "$work/run" "$work/cat"
    out=$("$bench" "$work/src" "$work/run" "$MAX_FETCHES")
    s=$(sed -n 's/^RESULT shuffle_s //p' <<<"$out")
    got=$(sed -n 's/^RESULT shuffle_bytes //p' <<<"$out")
    [ "$got" = "$bytes" ] || { echo "the shuffle moved $got bytes, not $bytes" >&2; exit 1; }
    cmp -s "$work/src/part-0" "$work/run/b/jobs/j1/part-0" || { echo "fetched part-0 differs" >&2; exit 1; }
    mkdir -p "$work/cat"
    start=$(now)
    for f in "$work"/src/*; do cat "$f" >"$work/cat/${f##*/}"; done
    c=$(awk -v a="$start" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }')
    best_shuffle=$(awk -v x="$s" -v b="$best_shuffle" 'BEGIN { print (b == "" || x < b) ? x : b }')
    best_cat=$(awk -v x="$c" -v b="$best_cat" 'BEGIN { print (b == "" || x < b) ? x : b }')
    echo "run $run: shuffle $s s, cat $c s"
done

rate() { awk -v n="$bytes" -v s="$1" 'BEGIN { printf "%.1f", n / 1e6 / s }'; }
shuffle_rate=$(rate "$best_shuffle")
cat_rate=$(rate "$best_cat")
ratio=$(awk -v a="$shuffle_rate" -v b="$cat_rate" 'BEGIN { printf "%.3f", a / b }')
echo
printf '%-28s %10s %10s\n' "$FILES files, $((bytes / 1000000)) MB" seconds MB/s
printf '%-28s %10s %10s\n' "shuffle (loopback, $MAX_FETCHES at a time)" "$best_shuffle" "$shuffle_rate"
printf '%-28s %10s %10s\n' "cat (same disk)" "$best_cat" "$cat_rate"
echo "ratio shuffle/cat: $ratio   (load $(uptime | sed 's/.*load average: //'), $(nproc) cores, $PROFILE build)"
echo "RESULT shuffle_mb_s $shuffle_rate"
echo "RESULT cat_mb_s $cat_rate"
