#!/usr/bin/env bash
# DRESS §V in the simulator: 20 MapReduce-style jobs submitted 5 s apart on a congested
# 5-node cluster (8 map + 2 reduce slots per node, 40 containers), with 10, 20, 30 and
# 40 % small-demand jobs, over many seeds, under `dress` and a baseline: by default
# the Capacity Scheduler's default configuration, one queue holding every job, within
# which it is FIFO (run as `fifo`, since the generator files jobs under queues `small`
# and `large` that `capacity` would separate); BASELINE=static uses queues small = 0.1, large = 0.9
# (DRESS's initial δ as a static share, small jobs served first). Prints one
# line per small-job share, averaged over seeds, comparing dress with capacity:
#
#   share seeds small_completion_change makespan_change large_change_mean
#         large_change_worst_mean large_over_15pct_share
#
# where a change is (dress − capacity) / capacity of the per-run value, then averaged
# over seeds: small and large completion are per-run means over the class, makespan is
# the run's, `large_change_worst_mean` is the mean over seeds of the run's most delayed
# large job, and `large_over_15pct_share` the share of large jobs (over all runs)
# delayed by more than 15 %.
#
#   scripts/dress-experiment.sh                 # seeds 1..20, debug build
#   SEEDS=50 PROFILE=release scripts/dress-experiment.sh
#   BASELINE=static scripts/dress-experiment.sh
#   DRESS_SET="--set interval_secs=2" scripts/dress-experiment.sh
#
# Needs bash, coreutils and awk. Work files go to a temporary directory removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${PROFILE:-debug}
SEEDS=${SEEDS:-20}
SHARES=${SHARES:-"0.1 0.2 0.3 0.4"}
DRESS_SET=${DRESS_SET:-}
CLUSTER=(--nodes 5 --map-slots 8 --reduce-slots 2)
case ${BASELINE:-default} in
    default) CAPACITY=(--policy fifo) ;;
    static) CAPACITY=(--policy capacity --set queues.small=0.1 --set queues.large=0.9) ;;
    *) echo "BASELINE must be default or static" >&2; exit 2 ;;
esac

flag=()
[ "$PROFILE" = release ] && flag=(--release)
cargo build -q "${flag[@]}" -p slotmarket-master --bin slotmarket-sim
SIM=${CARGO_TARGET_DIR:-target}/$PROFILE/slotmarket-sim

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Per-job completion of the run in $1 (jobs.csv): "id class completion_s" lines.
jobs() { awk -F, 'NR > 1 { print $1, $4, $12 }' "$1/jobs.csv"; }
# The makespan of the run in $1.
makespan() { awk '$1 == "makespan_s" { print $2 }' "$1/summary.txt"; }

echo "share seeds small_completion_change makespan_change large_change_mean large_change_worst_mean large_over_15pct_share"
for share in $SHARES; do
    for seed in $(seq 1 "$SEEDS"); do
        trace=$work/t-$share-$seed.jsonl
        "$SIM" gen dress --jobs 20 --small-share "$share" --seed "$seed" -o "$trace"
        # shellcheck disable=SC2086 # DRESS_SET is a list of flags
        "$SIM" run --trace "$trace" --policy dress $DRESS_SET "${CLUSTER[@]}" --seed "$seed" \
            --out "$work/d-$share-$seed" > /dev/null
        "$SIM" run --trace "$trace" "${CAPACITY[@]}" "${CLUSTER[@]}" --seed "$seed" \
            --out "$work/c-$share-$seed" > /dev/null
        paste -d' ' <(jobs "$work/d-$share-$seed") <(jobs "$work/c-$share-$seed") \
            | awk -v md="$(makespan "$work/d-$share-$seed")" -v mc="$(makespan "$work/c-$share-$seed")" '
                { if ($1 != $4) { print "job order differs" > "/dev/stderr"; exit 1 }
                  if ($2 == "delay-sensitive") { sd += $3; sc += $6; ns++ }
                  else { ch = ($3 - $6) / $6; lsum += ch; nl++; if (nl == 1 || ch > worst) worst = ch; if (ch > 0.15) over++ } }
                END { printf "%s %s %s %s %d %d\n", (ns ? (sd - sc) / sc : "-"), (md - mc) / mc,
                      (nl ? lsum / nl : 0), worst, over, nl }'
    done | tee -a "${RAW:-/dev/null}" | awk -v share="$share" '
        { if ($1 != "-") { small += $1; nsmall++ } mk += $2; lmean += $3; lworst += $4; over += $5; nl += $6; n++ }
        END { printf "%s %d %+.1f%% %+.2f%% %+.1f%% %+.1f%% %.1f%%\n", share, n,
              100 * small / (nsmall ? nsmall : 1), 100 * mk / n, 100 * lmean / n, 100 * lworst / n,
              100 * over / (nl ? nl : 1) }'
done
