#!/usr/bin/env bash
# Chaos soak: a master and three agents on 127.0.0.1 run a stream of real wordcount jobs
# while the master is killed with SIGKILL ten times (restarted on the same data
# directory) and agents are killed at random (and restarted). At the end it checks that
# every acknowledged job completed with the right output (compared with a
# `tr | sort | uniq -c` count of the same input), that no task process is left, and
# that `slotmarket nodes --json` shows no slot in use. Exits 0 only if all of that holds.
#
#   scripts/chaos.sh                       # debug build, defaults
#   PROFILE=release scripts/chaos.sh
#   JOBS=60 MASTER_KILLS=10 AGENT_KILLS=6 MAX_SECS=600 SEED=7 scripts/chaos.sh
#   KEEP=1 scripts/chaos.sh                # keep the work directory (logs) afterwards
#   CONTAINMENT=scan scripts/chaos.sh      # agents contain tasks by the process scan, as
#                                          # agents run by a normal user do, not cgroups
#
# Needs bash, coreutils and jq. Every process it starts leads its own process group and
# is killed on exit; the whole run is bounded by MAX_SECS.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${PROFILE:-debug}
JOBS=${JOBS:-40}
MASTER_KILLS=${MASTER_KILLS:-10}
AGENT_KILLS=${AGENT_KILLS:-6}
MAX_SECS=${MAX_SECS:-600}
SEED=${SEED:-$$}
AGENTS=3
RANDOM=$SEED

command -v jq >/dev/null || { echo "chaos: needs jq" >&2; exit 2; }
if [ "$PROFILE" = release ]; then cargo build --release --quiet; else cargo build --quiet; fi
BIN=$PWD/target/$PROFILE
WORK=$(mktemp -d -t slotmarket-chaos-XXXXXX)
STARTED=$SECONDS
declare -A GROUP=()   # role name -> process group id

log() { printf '[chaos %4ds] %s\n' "$((SECONDS - STARTED))" "$*"; }
die() { log "FAIL: $*"; exit 1; }
over_time() { [ $((SECONDS - STARTED)) -ge "$MAX_SECS" ]; }

stop_group() {
    local name=$1 signal=${2:-KILL}
    local pgid=${GROUP[$name]:-}
    [ -n "$pgid" ] || return 0
    kill "-$signal" -- "-$pgid" 2>/dev/null || true
    # Bounded wait for the leader to go (it is our child: reap it).
    wait "$pgid" 2>/dev/null || true
    unset "GROUP[$name]"
}

cleanup() {
    local status=$?
    for name in "${!GROUP[@]}"; do stop_group "$name" KILL; done
    # Task processes die with their agent (PDEATHSIG); make sure anyway.
    for pid in $(task_processes); do kill -KILL "$pid" 2>/dev/null || true; done
    if [ "${KEEP:-0}" = 1 ] || [ "$status" -ne 0 ]; then
        echo "chaos: work directory kept: $WORK" >&2
    else
        rm -rf "$WORK"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Processes whose working directory is inside $WORK: task processes run in container
# directories under the agents' work directories.
task_processes() {
    local root pid cwd
    root=$(realpath "$WORK")
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        cwd=$(readlink "$d/cwd" 2>/dev/null) || continue
        case $cwd in "$root"/*) [ "$pid" != $$ ] && echo "$pid" ;; esac
    done
}

ADDR=127.0.0.1:0
start_master() {
    rm -f "$WORK/master/master.addr"
    setsid "$BIN/slotmarket-master" --listen "$ADDR" --data-dir "$WORK/master" --cert-dir "$WORK/pki" \
        --agent-timeout-ms 4000 --heartbeat-interval-ms 500 2>>"$WORK/master.log" &
    GROUP[master]=$!
    for _ in $(seq 200); do [ -s "$WORK/master/master.addr" ] && break; sleep 0.05; done
    [ -s "$WORK/master/master.addr" ] || die "the master did not start (see $WORK/master.log)"
    ADDR=$(cat "$WORK/master/master.addr")
    export SLOTMARKET_MASTER=$ADDR
}

start_agent() {
    local n=$1 config=()
    if [ -n "${CONTAINMENT:-}" ]; then
        printf 'containment = "%s"\n' "$CONTAINMENT" >"$WORK/agent.toml"
        config=(--config "$WORK/agent.toml")
    fi
    setsid "$BIN/slotmarket-agent" "${config[@]}" --master "$ADDR" --name "node-$n" --cert-dir "$WORK/pki" \
        --map-slots 2 --reduce-slots 1 --kill-grace-ms 500 --work-dir "$WORK/agents/node-$n" \
        --data-dir "$WORK/shared" 2>>"$WORK/node-$n.log" &
    GROUP[agent-$n]=$!
}

# A client call that may meet a master being restarted: retried for up to 30 s.
cli() {
    local out
    for _ in $(seq 60); do
        if out=$("$BIN/slotmarket" "$@" 2>>"$WORK/cli.log"); then
            printf '%s\n' "$out"
            return 0
        fi
        sleep 0.5
    done
    return 1
}

# ----- set-up --------------------------------------------------------------------------
mkdir -p "$WORK/master" "$WORK/shared" "$WORK/jobs"
"$BIN/slotmarket" pki init --dir "$WORK/pki" >/dev/null
export SLOTMARKET_CERT_DIR=$WORK/pki SLOTMARKET_IDENTITY=admin
for n in $(seq "$AGENTS"); do
    "$BIN/slotmarket" pki issue --dir "$WORK/pki" --role agent --name "node-$n" >/dev/null
done
"$BIN/slotmarket" pki issue --dir "$WORK/pki" --role user --name chaos >/dev/null

# One input for every job (4 files of random text), and its expected word counts.
INPUT=$WORK/input
for t in 0 1 2 3; do
    "$BIN/slotmarket-task" gen-text --output "$INPUT" --bytes 2000000 --seed 3 --task "$t" --tasks 4 >/dev/null 2>&1
done
cat "$INPUT"/part-* | tr -s ' \t\r\f' '\n\n\n\n' | grep -v '^$' | LC_ALL=C sort | uniq -c \
    | awk '{ print $2 "\t" $1 }' >"$WORK/expected"
log "input: $(du -sh "$INPUT" | cut -f1), $(wc -l <"$WORK/expected") distinct words; seed $SEED"

# Wordcount whose map tasks first sleep a little, so that kills land on running tasks.
job_spec() {
    local i=$1 pause=$((RANDOM % 3))
    cat <<EOF
name = "chaos-$i"
input = "$INPUT"
[[stage]]
name = "map"
tasks = 4
slot = "map"
command = "sleep $pause && slotmarket-task wordcount map --input {input} --task {task} --tasks {tasks} --reducers {tasks.reduce} --job-dir {job_dir}"
[[stage]]
name = "reduce"
tasks = 2
slot = "reduce"
after = ["map"]
command = "slotmarket-task wordcount reduce --task {task} --maps {tasks.map} --job-dir {job_dir}"
EOF
}

start_master
for n in $(seq "$AGENTS"); do start_agent "$n"; done
log "master at $ADDR, $AGENTS agents"

# ----- the stream of jobs, in the background -------------------------------------------
submit_stream() {
    for i in $(seq "$JOBS"); do
        job_spec "$i" >"$WORK/jobs/chaos-$i.toml"
        # Only a submit that returned an id was acknowledged; a failed one is not
        # retried under the same name (it may or may not have been stored).
        if id=$(SLOTMARKET_IDENTITY=chaos "$BIN/slotmarket" submit "$WORK/jobs/chaos-$i.toml" \
            2>>"$WORK/cli.log"); then
            echo "$id" >>"$WORK/acknowledged"
        else
            echo "chaos-$i" >>"$WORK/unacknowledged"
        fi
        # About one a second, so the stream lasts as long as the faults.
        sleep "$((RANDOM % 2)).$((RANDOM % 10))"
    done
}
: >"$WORK/acknowledged"
submit_stream &
SUBMITTER=$!

# ----- faults --------------------------------------------------------------------------
agent_kills=0
for k in $(seq "$MASTER_KILLS"); do
    over_time && die "out of time during the faults"
    sleep "$((RANDOM % 3 + 2)).$((RANDOM % 10))"
    if [ "$agent_kills" -lt "$AGENT_KILLS" ] && [ $((RANDOM % 3)) -ne 0 ]; then
        n=$((RANDOM % AGENTS + 1))
        log "kill -9 agent node-$n"
        stop_group "agent-$n" KILL
        agent_kills=$((agent_kills + 1))
        sleep "0.$((RANDOM % 9 + 1))"
        start_agent "$n"
    fi
    log "kill -9 master ($k of $MASTER_KILLS)"
    stop_group master KILL
    sleep "0.$((RANDOM % 9 + 1))"
    start_master
done
wait "$SUBMITTER"
acked=$(wc -l <"$WORK/acknowledged")
log "faults done: $MASTER_KILLS master kills, $agent_kills agent kills; $acked of $JOBS submits acknowledged"
[ "$acked" -gt 0 ] || die "no submit was acknowledged"

# ----- every acknowledged job ends -----------------------------------------------------
pending=$(cat "$WORK/acknowledged")
while [ -n "$pending" ]; do
    over_time && die "out of time; jobs not ended: $(echo $pending)"
    still=""
    for job in $pending; do
        state=$(cli status "$job" --json | jq -r '.state // .summary.state // empty') || state=""
        case $state in
            completed) ;;
            failed | cancelled)
                cli status "$job" >&2 || true
                die "$job ended $state"
                ;;
            *) still="$still $job" ;;
        esac
    done
    pending=$(echo $still)
    [ -z "$pending" ] || sleep 1
done
log "all $acked acknowledged jobs completed"

# A submit that failed may still have been stored just before a kill: let every job the
# master knows end too, so none is still running when processes are counted below.
for _ in $(seq 600); do
    over_time && die "out of time waiting for unacknowledged jobs"
    active=$(cli jobs --json | jq '[.jobs[] | select(.state == "pending" or .state == "running")] | length')
    [ "$active" = 0 ] && break
    sleep 1
done

# ----- outputs ---------------------------------------------------------------------------
for job in $(cat "$WORK/acknowledged"); do
    out=$WORK/shared/jobs/$job/out
    ls "$out"/part-* >/dev/null 2>&1 || die "$job has no output in $out"
    if ! cat "$out"/part-* | LC_ALL=C sort | cmp -s - "$WORK/expected"; then
        die "$job counted differently from tr | sort | uniq -c (see $out)"
    fi
done
log "every output matches the reference count"

# ----- nothing left behind -------------------------------------------------------------
for _ in $(seq 100); do
    [ -z "$(task_processes)" ] && break
    sleep 0.1
done
left=$(task_processes)
[ -z "$left" ] || die "task processes left running: $(echo $left)"
used=""
for _ in $(seq 50); do
    used=$(cli nodes --json | jq '[.nodes[] | select(.connected) | .map_used + .reduce_used] | add // 0')
    [ "$used" = 0 ] && break
    sleep 0.2
done
[ "$used" = 0 ] || die "slots still in use: $(cli nodes)"
log "no task process left, no slot in use"
log "PASS in $((SECONDS - STARTED)) s"
