#!/usr/bin/env bash
# Launch-path benchmark (issue 2): 1,000 trivial tasks (`true`) and 200 tasks of
# `sleep 0.5` on a local master with two agents offering 8 map slots in all, next to
# `xargs -P 8` running the same commands through the same `sh -c`, in the same run.
# Prints tasks per second and makespan for both and Slotmarket's ratio to xargs.
#
#   scripts/bench/launch.sh            # release build, defaults
#   TRUE_TASKS=200 SLEEP_TASKS=40 scripts/bench/launch.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

TRUE_TASKS=${TRUE_TASKS:-1000}
SLEEP_TASKS=${SLEEP_TASKS:-200}
SLOTS=8
cargo build --release --quiet
BIN=${CARGO_TARGET_DIR:-$PWD/target}/release
WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

"$BIN/slotmarket" pki init --dir "$WORK/pki" >/dev/null
setsid "$BIN/slotmarket-master" --listen 127.0.0.1:0 --data-dir "$WORK/master" --cert-dir "$WORK/pki" \
    2>"$WORK/master.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/master/master.addr" ] && break; sleep 0.05; done
export SLOTMARKET_MASTER=$(cat "$WORK/master/master.addr")
export SLOTMARKET_CERT_DIR=$WORK/pki SLOTMARKET_IDENTITY=admin
for n in 1 2; do
    "$BIN/slotmarket" pki issue --dir "$WORK/pki" --role agent --name "node-$n" >/dev/null
    setsid "$BIN/slotmarket-agent" --name "node-$n" --cert-dir "$WORK/pki" --map-slots $((SLOTS / 2)) \
        --reduce-slots 1 --work-dir "$WORK/agents/node-$n" --data-dir "$WORK/shared" 2>"$WORK/node-$n.log" &
    PIDS+=($!)
done
for _ in $(seq 100); do
    [ "$("$BIN/slotmarket" nodes --json | grep -o '"connected": *true' | wc -l)" -eq 2 ] && break
    sleep 0.1
done

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
    start=$(now)
    "$BIN/slotmarket" submit --wait "$spec" >/dev/null 2>"$WORK/$1.submit.log"
    end=$(now)
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

# CPU seconds (user + system) a process has used so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
daemons_cpu() { # master, then the agents added up
    local agents=0
    for pid in "${PIDS[@]:1}"; do agents=$(calc "$agents + $(cpu_s "$pid")"); done
    printf 'master %.2f s, agents %.2f s' "$(cpu_s "${PIDS[0]}")" "$agents"
}

echo "slotmarket launch benchmark: $SLOTS slots ($(nproc) cores)"
before=$(daemons_cpu)
true_sm=$(slotmarket_run trivial "$TRUE_TASKS" "true")
echo "  daemon CPU before: $before; after the true tasks: $(daemons_cpu)"
true_x=$(xargs_run "$TRUE_TASKS" "true")
report "true" "$TRUE_TASKS" - "$true_sm" "$true_x"
ideal=$(calc "$SLEEP_TASKS * 0.5 / $SLOTS")
sleep_sm=$(slotmarket_run sleepers "$SLEEP_TASKS" "sleep 0.5")
sleep_x=$(xargs_run "$SLEEP_TASKS" "sleep 0.5")
report "sleep 0.5" "$SLEEP_TASKS" "$ideal" "$sleep_sm" "$sleep_x"
