#!/usr/bin/env bash
# One slot's task-to-task gap (issue 14's `sleep 0.5` goal, without the other slots'
# work interleaving): a master and one agent with one map slot run one job of
# TASKS x `sleep 0.5` (default 40); prints the time per task beyond 0.5 s, and the
# same for `sh -c 'sleep 0.5'` and for `sleep 0.5` run one after another (the floor of
# the task itself, with and without the shell).
# With BASELINE_BIN (a directory holding an older build's slotmarket, slotmarket-master
# and slotmarket-agent) both builds run, alternating, ROUNDS times (default 3), each on
# a cluster of its own.
#
#   BASELINE_BIN=/work/base10 NO_BUILD=1 ROUNDS=3 scripts/bench/slot-gap.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

TASKS=${TASKS:-40}
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release
. scripts/bench/lib.sh
bench_workdir slot-gap

calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
now() { date +%s.%N; }

# Prints the time per task beyond 0.5 s, in ms, of one job on a fresh one-slot cluster.
gap_run() { # bin_dir label
    local bin=$1 dir=$WORK/$2-$RANDOM start end
    start_sleep_slot "$bin" "$dir" gap "$TASKS"
    local agent=$AGENT_PID
    start=$(now)
    "$bin/slotmarket" submit --wait "$dir/gap.toml" >/dev/null 2>"$dir/submit.log"
    end=$(now)
    if command -v sqlite3 >/dev/null; then
        echo "  $2 phases (means): $(sqlite3 "$dir/master/slotmarket.db" <scripts/bench/phases.sql)" >&2
    fi
    kill -TERM -- "-$MASTER_PID" "-$agent" 2>/dev/null || true
    calc "($end - $start - $TASKS * 0.5) / $TASKS * 1000"
}

# The same tasks one after another, through `sh -c` or (`direct`) started as the agent
# starts a plain command where /bin/sh is dash.
serial_run() {
    local start end
    start=$(now)
    if [ "${1:-}" = direct ]; then
        for _ in $(seq "$TASKS"); do sleep 0.5; done
    else
        for _ in $(seq "$TASKS"); do sh -c 'sleep 0.5'; done
    fi
    end=$(now)
    calc "($end - $start - $TASKS * 0.5) / $TASKS * 1000"
}

echo "one slot, $TASKS x sleep 0.5 per job: ms per task beyond 0.5 s; $(uptime | sed 's/.*load/load/')"
for round in $(seq "${ROUNDS:-3}"); do
    if [ -n "${BASELINE_BIN:-}" ]; then
        printf 'round %d  baseline %6.2f ms\n' "$round" "$(gap_run "$BASELINE_BIN" baseline)"
    fi
    printf 'round %d  this     %6.2f ms\n' "$round" "$(gap_run "$BIN" this)"
    printf 'round %d  sh -c    %6.2f ms\n' "$round" "$(serial_run)"
    printf 'round %d  sleep    %6.2f ms\n' "$round" "$(serial_run direct)"
done
echo "load after: $(uptime | sed 's/.*load/load/')"
