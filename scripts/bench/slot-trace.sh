#!/usr/bin/env bash
# A slot's path through the agent, timed from its system calls: a master and one agent
# with one map slot run TASKS x `sleep 0.5` (default 20) under `perf trace -p AGENT`;
# scripts/bench/slot-trace.py then prints, over the cycles, the medians (q25-q75) of
# a task's exit (the group SIGKILL after its leader is reaped) -> the `Completed` report's
# datagram, the `Launch` datagram's arrival -> the next task's `clone3`, and exit -> clone3.
# perf trace makes every system call dearer: compare builds run alternately, not the
# absolute figures. Needs perf (and permission to trace the agent) and python3.
#
#   scripts/bench/slot-trace.sh BIN_DIR [BIN_DIR ...]   # each a directory holding
#       # slotmarket, slotmarket-master and slotmarket-agent; run in the order given
set -euo pipefail
cd "$(dirname "$0")/../.."
TASKS=${TASKS:-20}
. scripts/bench/lib.sh
bench_workdir slot-trace

trace_run() { # bin_dir n
    local bin=$1 dir=$WORK/run-$2
    start_sleep_slot "$bin" "$dir" trace "$TASKS"
    local agent=$AGENT_PID
    perf trace -p "$agent" -e 'recvmmsg,sendmsg,clone3,rename,mkdir,openat,kill,futex,read,statx' \
        -o "$dir/trace.txt" &
    local tracer=$!
    sleep 1 # perf attaches
    "$bin/slotmarket" submit --wait "$dir/trace.toml" >/dev/null 2>"$dir/submit.log"
    kill -INT "$tracer"
    wait "$tracer" || true
    kill -TERM -- "-$MASTER_PID" "-$agent" 2>/dev/null || true
    echo "$bin ($(uptime | sed 's/.*load/load/'))"
    python3 scripts/bench/slot-trace.py "$dir/trace.txt"
}

n=0
for bin in "$@"; do
    n=$((n + 1))
    trace_run "$bin" "$n"
done
