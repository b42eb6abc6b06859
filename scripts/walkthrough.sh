#!/usr/bin/env bash
# Runs the README's "A real cluster from nothing" on one machine and prints a transcript:
# a master and two agents on 127.0.0.1, each "host" with its own root under ROOT
# (ROOT/master, ROOT/node-1, ROOT/node-2, ROOT/alice) standing in for /, and ROOT/shared
# for the shared mount. The daemons run their systemd units' ExecStart line by hand
# (--service --config …), with the service paths under the host's root set in the
# configs. Every daemon it starts is stopped at the end, by its process id, and ROOT is
# removed (kept with WALKTHROUGH_KEEP=1).
#
#   scripts/walkthrough.sh [BIN_DIR] > transcript.txt      (BIN_DIR default target/debug)
set -euo pipefail

BIN=$(cd "${1:-target/debug}" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
ROOT=$(mktemp -d /tmp/slotmarket-walkthrough.XXXXXX)
PORT=${WALKTHROUGH_PORT:-27400}
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    [ -n "${WALKTHROUGH_KEEP:-}" ] || rm -rf "$ROOT"
}
trap cleanup EXIT

# Shows a command as typed (with ROOT spelled $ROOT), runs it, shows its exit code.
show() {
    local shown=${*//$ROOT/\$ROOT}
    shown=${shown//$BIN/\$BIN}
    shown=${shown//$REPO/.}
    echo "\$ $shown"
    set +e
    (eval "$@") 2>&1 | sed -e "s|$ROOT|\$ROOT|g" -e "s|$BIN|\$BIN|g" -e "s|$REPO|.|g"
    local code=${PIPESTATUS[0]}
    set -e
    echo "[exit $code]"
    echo
}

# Waits until FILE contains TEXT (a daemon's log line), at most 30 s.
await_log() {
    for _ in $(seq 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    echo "timed out waiting for '$2' in $1" >&2
    exit 1
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$REPO" rev-parse --short HEAD), binaries from $BIN"
echo "# BIN=$BIN, ROOT=$ROOT: \$ROOT/master, \$ROOT/node-1, \$ROOT/node-2 and \$ROOT/alice stand for four hosts' /"
echo

echo "## 0. Install (each host gets its binaries)"
show "install -D -m 0755 -t $ROOT/master/usr/local/bin $BIN/slotmarket-master $BIN/slotmarket"
for node in node-1 node-2; do
    show "install -D -m 0755 -t $ROOT/$node/usr/local/bin $BIN/slotmarket-agent $BIN/slotmarket-task"
done
show "install -D -m 0755 -t $ROOT/alice/usr/local/bin $BIN/slotmarket"
show "mkdir -p $ROOT/shared   # the shared mount every agent sees as its data_dir"

echo "## 1. Certificates (on the master)"
SM="$ROOT/master/usr/local/bin/slotmarket"
show "$SM pki init --dir $ROOT/master/etc/slotmarket/pki --host 127.0.0.1"
for node in node-1 node-2; do
    show "$SM pki issue --dir $ROOT/master/etc/slotmarket/pki --role agent --name $node"
    show "install -D -m 0600 -t $ROOT/$node/etc/slotmarket/pki $ROOT/master/etc/slotmarket/pki/{ca.pem,$node.pem,$node.key}"
done
show "$SM pki issue --dir $ROOT/master/etc/slotmarket/pki --role user --name alice"
show "install -D -m 0600 -t $ROOT/alice/home/alice/.config/slotmarket/pki $ROOT/master/etc/slotmarket/pki/{ca.pem,alice.pem,alice.key}"

echo "## 2. Configs (paths under each host's root; on a real host leave them out)"
cat >"$ROOT/master.toml" <<EOF
listen = "127.0.0.1:$PORT"
data_dir = "$ROOT/master/var/lib/slotmarket/master"
cert_dir = "$ROOT/master/etc/slotmarket/pki"
[policy]
name = "fifo"
EOF
show "install -D -m 0644 $ROOT/master.toml $ROOT/master/etc/slotmarket/master.toml && cat $ROOT/master/etc/slotmarket/master.toml"
for node in node-1 node-2; do
    cat >"$ROOT/$node.toml" <<EOF
master = "127.0.0.1:$PORT"
server_name = "localhost"
name = "$node"
map_slots = 2
reduce_slots = 1
cert_dir = "$ROOT/$node/etc/slotmarket/pki"
work_dir = "$ROOT/$node/var/lib/slotmarket/agent"
data_dir = "$ROOT/shared"
EOF
    show "install -D -m 0644 $ROOT/$node.toml $ROOT/$node/etc/slotmarket/agent.toml && cat $ROOT/$node/etc/slotmarket/agent.toml"
done
cat >"$ROOT/alice.toml" <<EOF
master = "127.0.0.1:$PORT"
server_name = "localhost"
cert_dir = "pki"
identity = "alice"
EOF
show "install -D -m 0644 $ROOT/alice.toml $ROOT/alice/home/alice/.config/slotmarket/config.toml && cat $ROOT/alice/home/alice/.config/slotmarket/config.toml"

echo "## 3. Services (the units' ExecStart lines, run by hand: no systemd here)"
show "cd $REPO && grep ^ExecStart configs/systemd/*.service"
echo "\$ slotmarket-master --service --config \$ROOT/master/etc/slotmarket/master.toml   (background, log in \$ROOT/master.log)"
start_master() {
    (cd / && RUST_LOG=info exec "$ROOT/master/usr/local/bin/slotmarket-master" --service \
        --config "$ROOT/master/etc/slotmarket/master.toml" >>"$ROOT/master.log" 2>&1) &
    MASTER_PID=$!
    PIDS+=("$MASTER_PID")
}
start_master
await_log "$ROOT/master.log" "master listening"
for node in node-1 node-2; do
    echo "\$ slotmarket-agent --service --config \$ROOT/$node/etc/slotmarket/agent.toml   (background, log in \$ROOT/$node.log)"
    (cd / && RUST_LOG=info exec "$ROOT/$node/usr/local/bin/slotmarket-agent" --service \
        --config "$ROOT/$node/etc/slotmarket/agent.toml" >"$ROOT/$node.log" 2>&1) &
    PIDS+=($!)
done
for _ in $(seq 300); do
    [ "$(grep -c 'agent registered' "$ROOT/master.log")" -ge 2 ] && break
    sleep 0.1
done
echo
show "sed -e 's/^[^ ]* *//' $ROOT/master.log | head -8"
show "$ROOT/master/usr/local/bin/slotmarket-master --service --help | grep -A2 -e --data-dir"

echo "## 4-5. Use it (as alice, on her machine: no flags, her config is found)"
export HOME="$ROOT/alice/home/alice"
unset XDG_CONFIG_HOME SLOTMARKET_CONFIG SLOTMARKET_MASTER SLOTMARKET_CERT_DIR SLOTMARKET_IDENTITY SLOTMARKET_SERVER_NAME
export PATH="$ROOT/alice/usr/local/bin:$PATH"
cp "$REPO/configs/jobs/wordcount.toml" "$ROOT/alice/home/alice/wordcount.toml"
cd "$ROOT/alice/home/alice"
show "slotmarket nodes"
show "slotmarket submit wordcount.toml --wait"
show "slotmarket run --tasks 4 --name hello -- sh -c 'echo task {task} of {tasks} in \$PWD'"
show "slotmarket wait j2"
show "slotmarket status j2 --tasks"
show "slotmarket logs j2 run:3"
show "slotmarket status j1"
show "slotmarket run --name slow -- sleep 20"
show "slotmarket run --after j3 --name after-slow -- true"
show "slotmarket queue"
show "slotmarket cancel j3 j4"
show "slotmarket jobs"
echo "## wait across a master restart (systemctl restart slotmarket-master, by hand)"
show "slotmarket run --name long -- sleep 8"
echo "\$ slotmarket wait j5 &   (output below)"
slotmarket wait j5 >"$ROOT/wait.out" 2>&1 &
WAIT_PID=$!
sleep 2
echo "\$ kill -TERM <master pid>; slotmarket-master --service --config …   (3 s later)"
kill -TERM "$MASTER_PID"
wait "$MASTER_PID" 2>/dev/null || true
sleep 3
start_master
wait "$WAIT_PID" && code=0 || code=$?
echo "\$ wait %1   # the background slotmarket wait's output and exit code:"
sed "s|$ROOT|\$ROOT|g" "$ROOT/wait.out"
echo "[exit $code]"
echo
show "slotmarket status j5 --tasks | tail -2"
show "grep -e 'shutting down' -e 'recovered' -e 'adopt' -e 'job ended' $ROOT/master.log | sed -e 's/^[^ ]* *//' | tail -8"
echo "## On a terminal: submit --wait draws a live block (last frame, under script(1))"
show "script -qc 'slotmarket submit wordcount.toml --wait' /dev/null | tr -d '\\r' | sed 's/\\x1b\\[[0-9]*A//g; s/\\x1b\\[J//g' | tail -5"
