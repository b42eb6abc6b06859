#!/usr/bin/env bash
# Launch-path benchmark (issue 2): 1,000 trivial tasks (`true`) and 200 tasks of
# `sleep 0.5` on a local master with two agents offering 8 map slots in all, next to
# `xargs -P 8` running the same commands through the same `sh -c`, in the same run.
# Prints tasks per second and makespan for both and Slotmarket's ratio to xargs, and
# (with sqlite3 installed) where each task's time went (scripts/bench/phases.sql).
#
#   scripts/bench/launch.sh            # release build, defaults
#   TRUE_TASKS=200 SLEEP_TASKS=40 scripts/bench/launch.sh
#   TRUE_PAIRS=5 scripts/bench/launch.sh   # the true job and xargs, 5 times each per round
#   BASELINE_BIN=/tmp/old/release ROUNDS=2 scripts/bench/launch.sh
#       # also run an older build's master, agents and CLI (a directory holding its
#       # slotmarket, slotmarket-master and slotmarket-agent) on a cluster of their own,
#       # alternating with this build ROUNDS times; its lines start with "baseline"
#   ATTACH='perf record -g -o /tmp/agents.$ATTACH_JOB.data -p $ATTACH_AGENTS' scripts/bench/launch.sh
#       # runs a command (through sh) beside each job of this build, with ATTACH_MASTER,
#       # ATTACH_AGENTS (comma-separated pids) and ATTACH_JOB set; SIGINT ends it after
#   NO_BUILD=1 ...                      # use the release binaries as they are
#   CONTAINMENT=scan ...                # every agent (the baseline's too) contains its tasks
#       # by the process scan, as one run by a normal user does, instead of cgroups
#   MASTER_TMPDIR=/dev/shm ...          # the masters' data directories there, the agents'
#       # under TMPDIR: splits what the disk costs between the master and the agents
set -euo pipefail
cd "$(dirname "$0")/../.."

TRUE_TASKS=${TRUE_TASKS:-1000}
SLEEP_TASKS=${SLEEP_TASKS:-200}
# A 1,000-task `true` run lasts about half a second, and this VM's cores change speed from
# one second to the next, so one pair's ratio swings by a fifth. Each round runs the job and
# xargs TRUE_PAIRS times, the first of each pair alternating, and reports the median pair.
TRUE_PAIRS=${TRUE_PAIRS:-3}
SLOTS=8
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release
. scripts/bench/lib.sh
bench_workdir launch-bench
MASTER_WORK=
if [ -n "${MASTER_TMPDIR:-}" ]; then
    MASTER_WORK=$(mktemp -d "$MASTER_TMPDIR/slotmarket-launch-masters.XXXXXX")
    trap 'bench_cleanup; rm -rf "$MASTER_WORK"' EXIT INT TERM
fi

# Starts a master and two agents from the binaries in $1, in $WORK/$2; sets CLUSTER_PIDS
# and exports SLOTMARKET_MASTER for the CLI.
start_cluster() { # bin_dir name
    local bin=$1 dir=$WORK/$2
    CLUSTER_MASTER_DIR=${MASTER_WORK:-$dir}/${MASTER_WORK:+$2-}master
    CLUSTER_PIDS=()
    mkdir -p "$dir"
    "$bin/slotmarket" pki init --dir "$dir/pki" >/dev/null
    setsid "$bin/slotmarket-master" --listen 127.0.0.1:0 --data-dir "$CLUSTER_MASTER_DIR" --cert-dir "$dir/pki" \
        2>"$dir/master.log" &
    CLUSTER_PIDS+=($!)
    PIDS+=($!)
    for _ in $(seq 100); do [ -s "$CLUSTER_MASTER_DIR/master.addr" ] && break; sleep 0.05; done
    export SLOTMARKET_MASTER=$(cat "$CLUSTER_MASTER_DIR/master.addr")
    export SLOTMARKET_CERT_DIR=$dir/pki SLOTMARKET_IDENTITY=admin
    local config=()
    if [ -n "${CONTAINMENT:-}" ]; then
        printf 'containment = "%s"\n' "$CONTAINMENT" >"$dir/agent.toml"
        config=(--config "$dir/agent.toml")
    fi
    for n in 1 2; do
        "$bin/slotmarket" pki issue --dir "$dir/pki" --role agent --name "node-$n" >/dev/null
        setsid "$bin/slotmarket-agent" "${config[@]}" --name "node-$n" --cert-dir "$dir/pki" --map-slots $((SLOTS / 2)) \
            --reduce-slots 1 --work-dir "$dir/agents/node-$n" --data-dir "$dir/shared" 2>"$dir/node-$n.log" &
        CLUSTER_PIDS+=($!)
        PIDS+=($!)
    done
    for _ in $(seq 100); do
        [ "$("$bin/slotmarket" nodes --json | grep -o '"connected": *true' | wc -l)" -eq 2 ] && break
        sleep 0.1
    done
}

stop_cluster() {
    for pid in "${CLUSTER_PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    for pid in "${CLUSTER_PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
        kill -KILL -- "-$pid" 2>/dev/null || true
    done
}

job_spec() { # name tasks command
    printf 'name = "%s"\n[[stage]]\nname = "run"\ntasks = %d\nslot = "map"\ncommand = "%s"\n' "$1" "$2" "$3" \
        >"$WORK/$1.toml"
    echo "$WORK/$1.toml"
}
now() { date +%s.%N; }
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }

# Prints the makespan in seconds of one job submitted and waited for on the cluster.
slotmarket_run() { # name tasks command
    local spec start end
    spec=$(job_spec "$@")
    local attached=
    if [ -n "${ATTACH:-}" ] && [ "$CLUSTER_BIN" = "$BIN" ]; then
        local agents="${CLUSTER_PIDS[*]:1}"
        ATTACH_MASTER=${CLUSTER_PIDS[0]} ATTACH_AGENTS=${agents// /,} ATTACH_JOB=$1 \
            setsid sh -c "$ATTACH" >"$WORK/attach.$1.log" 2>&1 &
        attached=$!
        sleep 1 # the profiler attaches
    fi
    start=$(now)
    "$CLUSTER_BIN/slotmarket" submit --wait "$spec" >/dev/null 2>"$WORK/$1.submit.log"
    end=$(now)
    if command -v sqlite3 >/dev/null; then
        echo "  ${CLUSTER_LABEL:+$CLUSTER_LABEL }$1 phases (means): $(sqlite3 "$CLUSTER_MASTER_DIR/slotmarket.db" \
            <scripts/bench/phases.sql)" >&2
    fi
    if [ -n "$attached" ]; then
        kill -INT -- "-$attached" 2>/dev/null || true
        wait "$attached" 2>/dev/null || true
        sed 's/^/  attach: /' "$WORK/attach.$1.log" >&2
    fi
    calc "$end - $start"
}

# Prints the makespan of xargs -P running the same command through sh -c.
xargs_run() { # tasks command
    local start end
    start=$(now)
    seq "$1" | xargs -P "$SLOTS" -I{} sh -c "$2"
    end=$(now)
    calc "$end - $start"
}

report() { # label tasks ideal slotmarket_s xargs_s
    printf '%-14s %6d tasks  slotmarket %7.3f s (%7.1f tasks/s)  xargs -P%d %7.3f s (%7.1f tasks/s)  ratio %5.2f' \
        "$1" "$2" "$4" "$(calc "$2 / $4")" "$SLOTS" "$5" "$(calc "$2 / $5")" "$(calc "$4 / $5")"
    if [ "$3" != "-" ]; then
        printf '  vs ideal %.1f s: %.3f x (xargs %.3f x)' "$3" "$(calc "$4 / $3")" "$(calc "$5 / $3")"
    fi
    echo
}

daemons_cpu() { # master, then the agents added up
    local agents=0
    for pid in "${CLUSTER_PIDS[@]:1}"; do agents=$(calc "$agents + $(cpu_s "$pid")"); done
    printf 'master %.2f s, agents %.2f s' "$(cpu_s "${CLUSTER_PIDS[0]}")" "$agents"
}

# One round on the binaries in $1: the true tasks, then the sleepers, each beside xargs.
# $2 prefixes the result lines ("" for this build).
round() { # bin_dir label
    CLUSTER_BIN=$1 CLUSTER_LABEL=$2
    start_cluster "$1" "cluster-${2:-new}-$RANDOM"
    local before after true_sm true_x sleep_sm sleep_x ideal
    before=$(daemons_cpu)
    true_sm=$(slotmarket_run trivial "$TRUE_TASKS" "true")
    after=$(daemons_cpu)
    echo "  ${2:+$2 }daemon CPU before: $before; after the true tasks: $after"
    true_x=$(xargs_run "$TRUE_TASKS" "true")
    local pairs=("$(calc "$true_sm / $true_x") $true_sm $true_x") pair
    for pair in $(seq 2 "$TRUE_PAIRS"); do
        if [ $((pair % 2)) -eq 0 ]; then
            true_x=$(xargs_run "$TRUE_TASKS" "true")
            true_sm=$(slotmarket_run "trivial$pair" "$TRUE_TASKS" "true" 2>/dev/null)
        else
            true_sm=$(slotmarket_run "trivial$pair" "$TRUE_TASKS" "true" 2>/dev/null)
            true_x=$(xargs_run "$TRUE_TASKS" "true")
        fi
        pairs+=("$(calc "$true_sm / $true_x") $true_sm $true_x")
    done
    if [ "$TRUE_PAIRS" -gt 1 ]; then
        echo "  ${2:+$2 }true, each pair's ratio: $(printf '%s\n' "${pairs[@]}" | awk '{ printf "%.2f ", $1 }')"
    fi
    read -r _ true_sm true_x < <(printf '%s\n' "${pairs[@]}" | sort -n | sed -n "$(( (TRUE_PAIRS + 1) / 2 ))p")
    report "${2:+$2 }true" "$TRUE_TASKS" - "$true_sm" "$true_x"
    ideal=$(calc "$SLEEP_TASKS * 0.5 / $SLOTS")
    sleep_sm=$(slotmarket_run sleepers "$SLEEP_TASKS" "sleep 0.5")
    sleep_x=$(xargs_run "$SLEEP_TASKS" "sleep 0.5")
    report "${2:+$2 }sleep 0.5" "$SLEEP_TASKS" "$ideal" "$sleep_sm" "$sleep_x"
    stop_cluster
}

echo "slotmarket launch benchmark: $SLOTS slots ($(nproc) cores)${CONTAINMENT:+, containment $CONTAINMENT}, $(uptime | sed 's/.*load/load/')"
for _ in $(seq "${ROUNDS:-1}"); do
    if [ -n "${BASELINE_BIN:-}" ]; then round "$BASELINE_BIN" baseline; fi
    round "$BIN" ""
done
echo "load after: $(uptime | sed 's/.*load/load/')"
