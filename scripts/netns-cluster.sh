#!/usr/bin/env bash
# A four-host cluster in network namespaces on this machine, deployed the way the
# README's "Deploying on hosts without a shared file system" section says, then checked:
# wordcount, sort and pi from configs/jobs run on it, their outputs are collected with
# `slotmarket fetch` and compared with a single-process run of the same task commands,
# then `slotmarket cleanup` must empty every agent's job directories.
#
#   sudo scripts/netns-cluster.sh            # MODE=local: each agent has its own disk
#   sudo MODE=shared scripts/netns-cluster.sh  # one data directory shared by the agents (NFS)
#
# Hosts: a bridge in a namespace of its own (the "switch") and four namespaces, master
# (10.77.13.1) and agent1..agent3 (10.77.13.11-13), each joined to the bridge by a veth
# pair. Each host has its own directory under the work directory (certificates it was
# given, config, data); in local mode no directory is shared. The client (user alice)
# runs in the master's namespace, with certificates of its own: users reach only the
# master. Needs root, iproute2, jq and python3 (3.11+, for tomllib).
#
# Environment: MODE (local | shared), PROFILE (debug | release, default debug), JOBS
# (default "wordcount sort pi"), WAIT_S (per job, default 900), SKIP_BUILD=1, KEEP=1
# (keep the work directory and print where). Exit status: 0 when every job's fetched
# outputs equal the single-process run's, 1 otherwise, 2 on a missing prerequisite.
# Teardown (trap): every process in the namespaces is killed and the namespaces deleted.

set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${MODE:-local}
PROFILE=${PROFILE:-debug}
JOBS=${JOBS:-"wordcount sort pi"}
WAIT_S=${WAIT_S:-900}
AGENTS=(agent1 agent2 agent3)
SUBNET=10.77.13
MASTER_IP=$SUBNET.1
PORT=7400
SHUFFLE_PORT=7401

say() { echo "netns-cluster: $*" >&2; }
[ "$(id -u)" = 0 ] || { say "run as root (it creates network namespaces)"; exit 2; }
for tool in ip jq python3 timeout; do
    command -v "$tool" >/dev/null || { say "needs $tool"; exit 2; }
done
case $MODE in local | shared) ;; *) say "MODE must be local or shared, not $MODE"; exit 2 ;; esac

if [ "${SKIP_BUILD:-0}" != 1 ]; then
    if [ "$PROFILE" = release ]; then cargo build --release --quiet; else cargo build --quiet; fi
fi
BIN=${CARGO_TARGET_DIR:-$PWD/target}/$PROFILE
for binary in slotmarket slotmarket-master slotmarket-agent slotmarket-task; do
    [ -x "$BIN/$binary" ] || { say "$BIN/$binary is missing; build first"; exit 2; }
done

# Namespace names carry this run's pid, so two runs never collide.
TAG=sm$$
SWITCH=$TAG-sw
ns() { echo "$TAG-$1"; }
WORK=$(mktemp -d -t slotmarket-netns-XXXXXX)
HOSTS=$WORK/hosts
declare -a NAMESPACES=()

teardown() {
    local status=$?
    for n in "${NAMESPACES[@]}"; do
        # Every process in the namespace: the daemons, their tasks, a waiting client.
        for pid in $(ip netns pids "$n" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    done
    for n in "${NAMESPACES[@]}"; do ip netns del "$n" 2>/dev/null || true; done
    if [ "${KEEP:-0}" = 1 ] || [ "$status" != 0 ]; then
        say "work directory kept: $WORK (logs in hosts/*/*.log)"
    else
        rm -rf "$WORK"
    fi
}
trap teardown EXIT
trap 'exit 130' INT TERM

# --- the network: a bridge in the switch namespace, one veth pair per host ------------
network_up() {
    ip netns add "$SWITCH"
    NAMESPACES+=("$SWITCH")
    ip -n "$SWITCH" link add br0 type bridge
    ip -n "$SWITCH" link set br0 up
    local i=0 host address
    for host in master "${AGENTS[@]}"; do
        i=$((i + 1))
        address=$MASTER_IP
        [ "$host" = master ] || address=$SUBNET.$((10 + i - 1))
        ip netns add "$(ns "$host")"
        NAMESPACES+=("$(ns "$host")")
        ip -n "$(ns "$host")" link set lo up
        ip link add eth0 netns "$(ns "$host")" type veth peer name "port$i" netns "$SWITCH"
        ip -n "$SWITCH" link set "port$i" master br0 up
        ip -n "$(ns "$host")" addr add "$address/24" dev eth0
        ip -n "$(ns "$host")" link set eth0 up
        echo "$address" >"$HOSTS/$host.ip"
    done
}

# Runs a command on a host (in its namespace), as its own process group.
on_host() {
    local host=$1
    shift
    setsid ip netns exec "$(ns "$host")" "$@"
}

# The client: user alice (IDENTITY=admin for `nodes`), from the master's namespace,
# bounded by LIMIT seconds (default 60).
client() {
    timeout "${LIMIT:-60}" ip netns exec "$(ns master)" env XDG_CONFIG_HOME="$HOSTS/client" \
        SLOTMARKET_MASTER="$MASTER_IP:$PORT" SLOTMARKET_SERVER_NAME=master \
        SLOTMARKET_CERT_DIR="$HOSTS/client/pki" SLOTMARKET_IDENTITY="${IDENTITY:-alice}" \
        "$BIN/slotmarket" "$@"
}

# --- the README's deployment steps --------------------------------------------------
# 1-2. Certificates, made on an admin workstation; each host gets ca.pem and its own pair.
make_pki() {
    local admin=$HOSTS/admin/pki
    "$BIN/slotmarket" pki init --dir "$admin" --host master --host "$MASTER_IP" >/dev/null
    for host in "${AGENTS[@]}"; do
        "$BIN/slotmarket" pki issue --dir "$admin" --role agent --name "$host" >/dev/null
    done
    "$BIN/slotmarket" pki issue --dir "$admin" --role user --name alice >/dev/null
    for holder in master "${AGENTS[@]}"; do
        mkdir -p "$HOSTS/$holder/pki"
        cp "$admin/ca.pem" "$admin/$holder.pem" "$admin/$holder.key" "$HOSTS/$holder/pki/"
    done
    mkdir -p "$HOSTS/client/pki"
    cp "$admin/ca.pem" "$admin/alice.pem" "$admin/alice.key" "$admin/admin.pem" "$admin/admin.key" \
        "$HOSTS/client/pki/"
}

# 3. The master's config and daemon.
start_master() {
    cat >"$HOSTS/master/master.toml" <<EOF
listen = "$MASTER_IP:$PORT"
data_dir = "$HOSTS/master/data"
cert_dir = "$HOSTS/master/pki"

[cleanup]
retain_s = 3600
EOF
    on_host master "$BIN/slotmarket-master" --config "$HOSTS/master/master.toml" 2>"$HOSTS/master/master.log" &
    local addr=$HOSTS/master/data/master.addr
    for _ in $(seq 200); do [ -s "$addr" ] && return; sleep 0.05; done
    say "the master did not start:"
    tail -20 "$HOSTS/master/master.log" >&2
    exit 1
}

# 4. Each agent's config (its own data directory in local mode) and daemon.
start_agents() {
    local host address data
    for host in "${AGENTS[@]}"; do
        address=$(cat "$HOSTS/$host.ip")
        data=$HOSTS/$host/data
        [ "$MODE" = shared ] && data=$WORK/shared
        cat >"$HOSTS/$host/agent.toml" <<EOF
master = "$MASTER_IP:$PORT"
server_name = "master"
cert_dir = "$HOSTS/$host/pki"
name = "$host"
map_slots = 2
reduce_slots = 1
work_dir = "$HOSTS/$host/work"
data_dir = "$data"
EOF
        if [ "$MODE" = local ]; then
            cat >>"$HOSTS/$host/agent.toml" <<EOF
data_mode = "local"
shuffle_listen = "$address:$SHUFFLE_PORT"
shuffle_advertise = "$address:$SHUFFLE_PORT"
EOF
        fi
        on_host "$host" "$BIN/slotmarket-agent" --config "$HOSTS/$host/agent.toml" 2>"$HOSTS/$host/agent.log" &
    done
    for _ in $(seq 300); do
        [ "$(IDENTITY=admin client nodes --json 2>/dev/null | jq '[.nodes[] | select(.connected)] | length')" = "${#AGENTS[@]}" ] && return
        sleep 0.1
    done
    say "not every agent registered:"
    for host in "${AGENTS[@]}"; do tail -5 "$HOSTS/$host/agent.log" >&2; done
    exit 1
}

# --- the check ------------------------------------------------------------------------
# Runs every task of SPEC's stages in dependency order, one at a time, in DIR: the
# single-process reference.
reference_run() {
    local spec=$1 dir=$2
    mkdir -p "$dir"
    PATH="$BIN:$PATH" python3 - "$spec" "$dir" <<'EOF'
import subprocess, sys, tomllib
spec_path, job_dir = sys.argv[1], sys.argv[2]
with open(spec_path, "rb") as f:
    spec = tomllib.load(f)
stages = spec["stage"]
counts = {s["name"]: s["tasks"] for s in stages}
done, order = set(), []
while len(order) < len(stages):
    ready = [s for s in stages if s["name"] not in done and set(s.get("after", [])) <= done]
    if not ready:
        sys.exit(f"{spec_path}: the stages' `after` lists form a cycle")
    for s in ready:
        order.append(s)
        done.add(s["name"])
for stage in order:
    for task in range(stage["tasks"]):
        command = stage["command"].replace("{job_dir}", job_dir)
        command = command.replace("{task}", str(task)).replace("{tasks}", str(stage["tasks"]))
        for name, n in counts.items():
            command = command.replace("{tasks." + name + "}", str(n))
        if "input" in spec:
            command = command.replace("{input}", spec["input"])
        subprocess.run(command, shell=True, check=True, stdout=subprocess.DEVNULL)
EOF
}

# Submits configs/jobs/JOB.toml, waits for it, fetches its outputs and compares them
# with the reference run; returns non-zero on any difference.
check_job() {
    local name=$1 spec=configs/jobs/$1.toml answer job state
    say "$name: submitting"
    answer=$(LIMIT=$WAIT_S client --json submit "$spec" --wait) || {
        say "$name: failed or did not finish within $WAIT_S s: $answer"
        return 1
    }
    job=$(jq -r '.job' <<<"$answer")
    state=$(jq -r '.status.summary.state // .status.state // empty' <<<"$answer")
    if [ "$state" != completed ]; then
        say "$name ($job) ended $state: $(jq -c '.status.message // empty' <<<"$answer")"
        return 1
    fi
    LIMIT=$WAIT_S client fetch "$job" "$WORK/fetched/$name" >&2
    say "$name ($job): single-process reference run"
    reference_run "$spec" "$WORK/reference/$name"
    if diff -r "$WORK/reference/$name/out" "$WORK/fetched/$name" >"$WORK/$name.diff"; then
        say "$name ($job): fetched outputs equal the single-process run ($(find "$WORK/fetched/$name" -type f | wc -l) files)"
    else
        say "$name ($job): outputs differ from the single-process run; see $WORK/$name.diff"
        head -20 "$WORK/$name.diff" >&2
        return 1
    fi
}

mkdir -p "$HOSTS/admin" "$WORK/fetched" "$WORK/reference"
for host in master "${AGENTS[@]}"; do mkdir -p "$HOSTS/$host"; done
network_up
make_pki
start_master
start_agents
say "cluster up in $MODE mode: master $MASTER_IP, agents ${AGENTS[*]}"
failed=0
for name in $JOBS; do
    check_job "$name" || failed=1
done
if [ "$failed" = 0 ]; then say "every job's outputs are correct"; fi

# Cleanup: `slotmarket cleanup` (every ended job of alice's) empties every agent's job
# directories.
LIMIT=$WAIT_S client cleanup >&2
for host in "${AGENTS[@]}"; do
    jobs_dir=$HOSTS/$host/data/jobs
    [ "$MODE" = shared ] && jobs_dir=$WORK/shared/jobs
    for _ in $(seq 300); do
        [ -z "$(ls -A "$jobs_dir" 2>/dev/null)" ] && break
        sleep 0.1
    done
    if [ -n "$(ls -A "$jobs_dir" 2>/dev/null)" ]; then
        say "$host: job directories left after cleanup: $(ls "$jobs_dir" | tr '\n' ' ')"
        failed=1
    fi
done
[ "$failed" = 0 ] && say "cleanup removed every job directory"
exit "$failed"
