#!/usr/bin/env bash
# CLI benchmark (issue 14): on a local master with one agent (8 map slots), in one run,
#   - round trip: `slotmarket nodes`, TIMES times one after another, median and p99 in ms,
#     beside the floor of starting the same binary (`slotmarket --version`, no connection);
#   - latency: `slotmarket submit --wait` of one `true` task, TIMES times, p50 and p99;
#   - submit rate: PARALLEL CLIs at once, each submitting SUBMITS jobs one process per
#     job, against the master with its agent and again against a second master with no
#     agent (submission only: its jobs queue); one `slotmarket submit` carrying BATCH specs over one connection; and PARALLEL
#     CLIs at once, each carrying SUBMITS specs; the two one-job rates are the median of
#     RATE_ROUNDS rounds (default 3), each round listed;
#   - CPU per run (with perf): `--version`, `nodes` and a one-job `submit`, each TIMES times,
#     in CPU_ROUNDS rounds (default 5) that alternate the CLIs being compared; the median round.
# Every submit is acknowledged only once the master has it on disk, so the rates include
# the store's commits. Times come from bash's $EPOCHREALTIME (no process per reading).
#
#   scripts/bench/cli.sh                       # release build
#   PROFILE=debug TIMES=20 scripts/bench/cli.sh # quicker, unoptimised
#   KEEP_OUTPUT=1 scripts/bench/cli.sh         # also print `RESULT name value` lines for all.sh
#   NO_BUILD=1 scripts/bench/cli.sh            # time what is built, without building first
#   BASELINE_CLI=/tmp/old/slotmarket scripts/bench/cli.sh   # also time an older CLI's round
#                                              # trip and submit --wait, in the same run
#   THIS_CLI=$(scripts/build-cli-musl.sh) scripts/bench/cli.sh
#                                              # time another CLI binary as this build's
#                                              # (the daemons stay this build's)
#   BASELINE_BIN=/tmp/old/release scripts/bench/cli.sh
#       # also start an older build's master and agent (a directory holding its
#       # slotmarket, slotmarket-master and slotmarket-agent) beside this build's, and time
#       # `submit --wait` of one task on both, alternating run by run; also print its CLI's
#       # CPU per run (against this build's master) and its submission-only rate
set -euo pipefail
cd "$(dirname "$0")/../.."

TIMES=${TIMES:-50}
PARALLEL=${PARALLEL:-8}
SUBMITS=${SUBMITS:-40}
RATE_ROUNDS=${RATE_ROUNDS:-3}
BATCH=${BATCH:-2000}
PROFILE=${PROFILE:-release}
if [ -n "${NO_BUILD:-}" ]; then
    : # NO_BUILD=1: time the binaries already in the target directory
elif [ "$PROFILE" = release ]; then
    cargo build --release --quiet --bins
else
    cargo build --quiet --bins
fi
BIN=${CARGO_TARGET_DIR:-$PWD/target}/$PROFILE
. scripts/bench/lib.sh
bench_workdir cli-bench

# Every CLI timed below runs from a fresh copy in WORK. How a binary's pages came into the
# page cache changes what each run costs: the same 25 MB file paged in by exec's faults
# took 232 page faults and about 0.15 ms more CPU per submit than a copy written a moment
# before (200 faults; docs/benchmarks.md, seventh round), so a build just linked, timed
# beside a baseline that was paged in long ago, would win by that alone.
fresh_cli() { # source_binary name; prints the copy's path
    mkdir -p "$WORK/$2" && cp "$1" "$WORK/$2/slotmarket" && echo "$WORK/$2/slotmarket"
}
CLI_NEW=$(fresh_cli "${THIS_CLI:-$BIN/slotmarket}" cli-new)
[ -z "${BASELINE_CLI:-}" ] || BASELINE_CLI=$(fresh_cli "$BASELINE_CLI" cli-baseline)
[ -z "${BASELINE_BIN:-}" ] || CLI_OLD=$(fresh_cli "$BASELINE_BIN/slotmarket" cli-old)

start_pair "$BIN" "$WORK"
export SLOTMARKET_MASTER=$MASTER_ADDR
export SLOTMARKET_CERT_DIR=$WORK/pki SLOTMARKET_IDENTITY=admin
if [ -n "${BASELINE_BIN:-}" ]; then
    mkdir -p "$WORK/baseline"
    start_pair "$BASELINE_BIN" "$WORK/baseline"
    BASELINE_MASTER=$MASTER_ADDR
fi
# A master with no agent, for the submission-only rate below.
mkdir -p "$WORK/lone"
start_master "$BIN" "$WORK/lone"
LONE_MASTER=$MASTER_ADDR LONE_PID=$MASTER_PID

printf 'name = "one"\n[[stage]]\nname = "run"\ntasks = 1\nslot = "map"\ncommand = "true"\n' >"$WORK/one.toml"

us() { echo "${EPOCHREALTIME/./}"; }

# Runs "$@" TIMES times; prints each run's wall time in ms, one per line.
times_ms() {
    local start end
    for _ in $(seq "$TIMES"); do
        start=$(us)
        "$@" >/dev/null 2>&1
        end=$(us)
        echo $(((end - start) / 1000)).$(printf '%03d' $(((end - start) % 1000)))
    done
}

# Reads numbers on stdin; prints "p50 p99" (nearest rank).
percentiles() {
    sort -n | awk '{ v[NR] = $1 } END {
        i50 = int(NR * 0.50 + 0.999999); i99 = int(NR * 0.99 + 0.999999)
        printf "%.1f %.1f\n", v[i50], v[i99] }'
}

# The submit rate of PARALLEL CLIs each making SUBMITS one-job submits; prints jobs/s.
# CLI= picks the binary (this build's by default).
parallel_rate() {
    local start end cli=${CLI:-$CLI_NEW}
    start=$(us)
    for _ in $(seq "$PARALLEL"); do
        (for _ in $(seq "$SUBMITS"); do "$cli" submit "$WORK/one.toml" >/dev/null; done) &
    done
    wait
    end=$(us)
    awk -v n=$((PARALLEL * SUBMITS)) -v us=$((end - start)) 'BEGIN { printf "%.0f\n", n / (us / 1e6) }'
}

# Clock ticks all CPUs have spent busy since boot (user, nice, system, irq, softirq).
machine_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# parallel_rate RATE_ROUNDS times (default 3); prints the median, the whole machine's busy
# time per job in ms and as a share of all its cores, then every round's rate. One round
# lasts about half a second, and this VM's cores change speed from one second to the next.
rate_rounds() {
    local rates=() ticks start
    ticks=$(machine_ticks) start=$(us)
    for _ in $(seq "$RATE_ROUNDS"); do rates+=("$(parallel_rate)"); done
    local busy
    busy=$(awk -v t=$(($(machine_ticks) - ticks)) -v hz="$(getconf CLK_TCK)" -v us=$(($(us) - start)) \
        -v n=$((PARALLEL * SUBMITS * RATE_ROUNDS)) -v cores="$(nproc)" \
        'BEGIN { printf "%.2f %.0f", t / hz * 1000 / n, t / hz / (us / 1e6) / cores * 100 }')
    echo "$(printf '%s\n' "${rates[@]}" | sort -n | sed -n "$(( (${#rates[@]} + 1) / 2 ))p") $busy ${rates[*]}"
}

# The rate of PARALLEL CLIs each submitting SUBMITS specs in one invocation; prints jobs/s.
parallel_batch_rate() {
    local start end specs=()
    for _ in $(seq "$SUBMITS"); do specs+=("$WORK/one.toml"); done
    start=$(us)
    for _ in $(seq "$PARALLEL"); do "$CLI_NEW" submit "${specs[@]}" >/dev/null & done
    wait
    end=$(us)
    awk -v n=$((PARALLEL * SUBMITS)) -v us=$((end - start)) 'BEGIN { printf "%.0f\n", n / (us / 1e6) }'
}

# The rate of one `slotmarket submit` with BATCH specs (one connection); prints jobs/s.
batch_rate() {
    local start end specs=()
    for _ in $(seq "$BATCH"); do specs+=("$WORK/one.toml"); done
    start=$(us)
    "$CLI_NEW" submit "${specs[@]}" >/dev/null
    end=$(us)
    awk -v n="$BATCH" -v us=$((end - start)) 'BEGIN { printf "%.0f\n", n / (us / 1e6) }'
}

# CPU of one run of "$@" in ms (perf stat task-clock, mean of $1 runs).
cpu_ms() {
    local runs=$1
    shift
    perf stat -x, -r "$runs" -e task-clock "$@" 2>&1 >/dev/null | awk -F, '/task-clock/ { printf "%.2f\n", $1 }'
}

# The median of the rounds' CPU per run of CLI number $1 for command $2; "-" without perf.
cpu_median() {
    local rounds="$WORK/cpu.$1.$2"
    [ -s "$rounds" ] || { echo -; return; }
    sort -n "$rounds" | awk '{ v[NR] = $1 } END { printf "%.2f\n", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "slotmarket CLI benchmark ($PROFILE build, $(nproc) cores): $(uptime | sed 's/.*load/load/')"
read -r floor50 floor99 < <(times_ms "$CLI_NEW" --version | percentiles)
read -r nodes50 nodes99 < <(times_ms "$CLI_NEW" nodes | percentiles)
read -r wait50 wait99 < <(times_ms "$CLI_NEW" submit --wait "$WORK/one.toml" | percentiles)
printf '%-34s p50 %7.1f ms  p99 %7.1f ms\n' "process start (--version)" "$floor50" "$floor99"
printf '%-34s p50 %7.1f ms  p99 %7.1f ms\n' "round trip (nodes)" "$nodes50" "$nodes99"
printf '%-34s p50 %7.1f ms  p99 %7.1f ms\n' "one true task (submit --wait)" "$wait50" "$wait99"
if [ -n "${BASELINE_CLI:-}" ]; then
    read -r bnodes50 bnodes99 < <(times_ms "$BASELINE_CLI" nodes | percentiles)
    read -r bwait50 bwait99 < <(times_ms "$BASELINE_CLI" submit --wait "$WORK/one.toml" | percentiles)
    printf '%-34s p50 %7.1f ms  p99 %7.1f ms\n' "baseline round trip (nodes)" "$bnodes50" "$bnodes99"
    printf '%-34s p50 %7.1f ms  p99 %7.1f ms\n' "baseline submit --wait" "$bwait50" "$bwait99"
fi
if [ -n "${BASELINE_BIN:-}" ]; then
    # One run on each cluster in turn, so both see the same load.
    : >"$WORK/wait.new" && : >"$WORK/wait.old"
    for _ in $(seq "$TIMES"); do
        TIMES=1 times_ms "$CLI_NEW" submit --wait "$WORK/one.toml" >>"$WORK/wait.new"
        SLOTMARKET_MASTER=$BASELINE_MASTER SLOTMARKET_CERT_DIR=$WORK/baseline/pki TIMES=1 \
            times_ms "$CLI_OLD" submit --wait "$WORK/one.toml" >>"$WORK/wait.old"
    done
    read -r alt50 alt99 < <(percentiles <"$WORK/wait.new")
    read -r old50 old99 < <(percentiles <"$WORK/wait.old")
    printf '%-34s p50 %7.1f ms  p99 %7.1f ms\n' "alternating: this build" "$alt50" "$alt99"
    printf '%-34s p50 %7.1f ms  p99 %7.1f ms\n' "alternating: baseline build" "$old50" "$old99"
fi
# CPU per run: CPU_ROUNDS rounds of TIMES / CPU_ROUNDS runs per CLI and command, the CLIs
# taking turns within each round, and the median of the rounds. The machine's speed swings
# between minutes, so CLIs timed one after the other would differ by that alone.
CPU_ROUNDS=${CPU_ROUNDS:-5}
clis=("$CLI_NEW" ${BASELINE_CLI:+"$BASELINE_CLI"} ${CLI_OLD:+"$CLI_OLD"})
if command -v perf >/dev/null; then
    runs=$(((TIMES + CPU_ROUNDS - 1) / CPU_ROUNDS))
    for _ in $(seq "$CPU_ROUNDS"); do
        for i in "${!clis[@]}"; do
            cpu_ms "$runs" "${clis[$i]}" --version >>"$WORK/cpu.$i.version"
            cpu_ms "$runs" "${clis[$i]}" nodes >>"$WORK/cpu.$i.nodes"
            cpu_ms "$runs" "${clis[$i]}" submit "$WORK/one.toml" >>"$WORK/cpu.$i.submit"
        done
    done
fi
for i in "${!clis[@]}"; do
    case ${clis[$i]} in
        "$CLI_NEW") label="this build" ;;
        "${CLI_OLD:-}") label="baseline build" ;;
        *) label=baseline ;;
    esac
    printf '%-34s --version %s ms  nodes %s ms  submit %s ms\n' "CPU per run ($label)" \
        "$(cpu_median "$i" version)" "$(cpu_median "$i" nodes)" "$(cpu_median "$i" submit)"
done
read -r rate busy busy_pct rates < <(rate_rounds)
printf '%-34s %7s jobs/s (median of %s; machine busy %s ms per job, %s %% of its cores)\n' \
    "$PARALLEL parallel CLIs x $SUBMITS submits" "$rate" "${rates// /, }" "$busy" "$busy_pct"
# The row above also pays for running every job: the agent starts each `true` task on the
# same cores, and the master handles its reports and commits its end. This one sends the
# same submits to a master with no agent, where the jobs only queue: what submission alone
# costs, the figure the goal of 500 one-job CLIs a second is about. Both are kept.
lone_cpu=$(cpu_s "$LONE_PID")
read -r lone lone_busy lone_busy_pct lones < <(SLOTMARKET_MASTER=$LONE_MASTER SLOTMARKET_CERT_DIR=$WORK/lone/pki rate_rounds)
lone_cpu=$(awk -v a="$lone_cpu" -v b="$(cpu_s "$LONE_PID")" -v n=$((PARALLEL * SUBMITS * RATE_ROUNDS)) \
    'BEGIN { printf "%.2f", (b - a) * 1000 / n }')
printf '%-34s %7s jobs/s (median of %s; master CPU %s ms per job; machine busy %s ms per job, %s %% of its cores)\n' \
    "$PARALLEL parallel CLIs x $SUBMITS submits, no agent (submission only)" "$lone" "${lones// /, }" "$lone_cpu" \
    "$lone_busy" "$lone_busy_pct"
if [ -n "${BASELINE_BIN:-}" ]; then
    # The same row for this build's CLI and the baseline's, alternating three times
    # against the same agentless master, so both see the same load.
    for round in 1 2 3; do
        new=$(SLOTMARKET_MASTER=$LONE_MASTER SLOTMARKET_CERT_DIR=$WORK/lone/pki parallel_rate)
        old=$(CLI=$CLI_OLD SLOTMARKET_MASTER=$LONE_MASTER SLOTMARKET_CERT_DIR=$WORK/lone/pki parallel_rate)
        printf '%-34s this build %5s  baseline %5s jobs/s\n' "no agent, alternating ($round)" "$new" "$old"
    done
fi
if "$CLI_NEW" submit --help | grep -Eq 'JOB.toml>(\.\.\.| \[MORE.toml\]\.\.\.)'; then
    batch=$(batch_rate)
    printf '%-34s %7s jobs/s\n' "one submit of $BATCH specs" "$batch"
    pbatch=$(parallel_batch_rate)
    printf '%-34s %7s jobs/s\n' "$PARALLEL parallel CLIs x $SUBMITS specs each" "$pbatch"
else
    batch=- pbatch=-
    echo "one submit of many specs: not supported by this build"
fi
echo "load after: $(uptime | sed 's/.*load/load/')"
if [ -n "${KEEP_OUTPUT:-}" ]; then
    echo "RESULT start_ms $floor50"
    echo "RESULT nodes_ms $nodes50"
    echo "RESULT wait_ms $wait50"
    echo "RESULT wait_p99_ms $wait99"
    echo "RESULT parallel_jobs_s $rate"
    echo "RESULT parallel_no_agent_jobs_s $lone"
    echo "RESULT batch_jobs_s $batch"
    echo "RESULT parallel_batch_jobs_s $pbatch"
fi
