#!/usr/bin/env bash
# Where the CPU of one-spec submits goes when the jobs also run (issue 14): on a local
# master with one agent (8 map slots), PARALLEL CLIs submit SUBMITS one-`true`-task jobs
# each, ROUNDS times; each round waits for the jobs to end, then prints the CPU per job of
# the whole machine (/proc/stat), the master's and the agent's (/proc/PID/stat), and the
# rest: the CLI processes, the tasks and the kernel's work for them, plus the few `jobs`
# polls that wait for the end. At 500 jobs/s on 2 cores all of it must fit in 4 ms.
#
#   scripts/bench/submit-budget.sh                 # release build, built first
#   NO_BUILD=1 ROUNDS=5 scripts/bench/submit-budget.sh
#   NO_BUILD=1 BIN=/tmp/old/release scripts/bench/submit-budget.sh   # an older build's binaries
set -euo pipefail
cd "$(dirname "$0")/../.."

PARALLEL=${PARALLEL:-8}
SUBMITS=${SUBMITS:-40}
ROUNDS=${ROUNDS:-3}
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bins
BIN=${BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release}
. scripts/bench/lib.sh
bench_workdir budget
start_pair "$BIN" "$WORK"
MASTER=$MASTER_PID AGENT=$AGENT_PID
export SLOTMARKET_MASTER=$MASTER_ADDR SLOTMARKET_CERT_DIR=$WORK/pki SLOTMARKET_IDENTITY=admin
printf 'name = "one"\n[[stage]]\nname = "run"\ntasks = 1\nslot = "map"\ncommand = "true"\n' >"$WORK/one.toml"

hz=$(getconf CLK_TCK)
process_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $6 + $7 + $8 }' /proc/stat; }

echo "one-spec submits with the agent running each job: $(cut -d' ' -f1-3 /proc/loadavg | sed 's/^/load /')"
for round in $(seq "$ROUNDS"); do
    m0=$(process_ticks "$MASTER") a0=$(process_ticks "$AGENT") s0=$(busy_ticks) t0=${EPOCHREALTIME/./}
    (
        for _ in $(seq "$PARALLEL"); do
            (for _ in $(seq "$SUBMITS"); do "$BIN/slotmarket" submit "$WORK/one.toml" >/dev/null; done) &
        done
        wait
    )
    for _ in $(seq 100); do
        "$BIN/slotmarket" jobs --json | grep -q '"queued"\|"running"' || break
        sleep 0.2
    done
    t1=${EPOCHREALTIME/./} m1=$(process_ticks "$MASTER") a1=$(process_ticks "$AGENT") s1=$(busy_ticks)
    awk -v r="$round" -v n=$((PARALLEL * SUBMITS)) -v t=$((t1 - t0)) -v hz="$hz" \
        -v s=$((s1 - s0)) -v m=$((m1 - m0)) -v a=$((a1 - a0)) 'BEGIN {
        per = 1000 / hz / n
        printf "round %d: %d jobs ended in %.2f s (%.0f jobs/s); CPU per job: all %.2f ms = master %.2f + agent %.2f + the rest %.2f\n",
            r, n, t / 1e6, n / (t / 1e6), s * per, m * per, a * per, (s - m - a) * per }'
done
