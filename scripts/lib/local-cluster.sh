# Sourced by the live scripts (scripts/dress-live.sh, scripts/jockey-live.sh,
# scripts/dp/live.sh): a local cluster of one master and AGENTS agents on 127.0.0.1,
# every process leading its own process group and killed on exit.
#
# The caller sets NAME (for messages and the work directory), PROFILE (debug or
# release) and AGENTS before sourcing; SKIP_BUILD=1 skips the build, KEEP=1 keeps the
# work directory. Sourcing builds, then sets BIN, WORK (with WORK/jobs) and GROUP, and
# defines stop_all, cluster_pki and cluster_start.

command -v jq >/dev/null || { echo "$NAME: needs jq" >&2; exit 2; }
if [ "${SKIP_BUILD:-0}" != 1 ]; then
    if [ "$PROFILE" = release ]; then cargo build --release --quiet; else cargo build --quiet; fi
fi
BIN=${CARGO_TARGET_DIR:-$PWD/target}/$PROFILE
WORK=$(mktemp -d -t "slotmarket-$NAME-XXXXXX")
declare -A GROUP=()

# Kills every process group started so far (the daemons and any helper loops in GROUP).
stop_all() {
    for name in "${!GROUP[@]}"; do
        kill -KILL -- "-${GROUP[$name]}" 2>/dev/null || true
        wait "${GROUP[$name]}" 2>/dev/null || true
        unset "GROUP[$name]"
    done
}
cluster_cleanup() {
    stop_all
    if [ "${KEEP:-0}" = 1 ]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cluster_cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$WORK/jobs"

# cluster_pki ROLE:NAME...: a certificate authority in WORK/pki, an agent certificate
# for each of node-1..node-AGENTS and one certificate per ROLE:NAME (user:alice,
# admin:root); exports SLOTMARKET_CERT_DIR.
cluster_pki() {
    "$BIN/slotmarket" pki init --dir "$WORK/pki" >/dev/null
    for n in $(seq "$AGENTS"); do
        "$BIN/slotmarket" pki issue --dir "$WORK/pki" --role agent --name "node-$n" >/dev/null
    done
    for who in "$@"; do
        "$BIN/slotmarket" pki issue --dir "$WORK/pki" --role "${who%%:*}" --name "${who#*:}" >/dev/null
    done
    export SLOTMARKET_CERT_DIR=$WORK/pki
}

# cluster_start DIR CONFIG [IDENTITY]: a master with the master.toml text CONFIG and its
# data, log and agents' directories under DIR, and AGENTS agents of 4 map and 2 reduce
# slots each sharing DIR/shared; exports SLOTMARKET_MASTER and returns once every agent
# has registered (asked as IDENTITY, default SLOTMARKET_IDENTITY).
cluster_start() {
    local dir=$1 config=$2 who=${3:-${SLOTMARKET_IDENTITY:-}}
    mkdir -p "$dir"
    printf '%s\n' "$config" >"$dir/master.toml"
    setsid "$BIN/slotmarket-master" --config "$dir/master.toml" --listen 127.0.0.1:0 --data-dir "$dir/master" \
        --cert-dir "$WORK/pki" 2>>"$dir/master.log" &
    GROUP[master]=$!
    for _ in $(seq 200); do [ -s "$dir/master/master.addr" ] && break; sleep 0.05; done
    [ -s "$dir/master/master.addr" ] || { echo "the master did not start" >&2; cat "$dir/master.log" >&2; exit 1; }
    SLOTMARKET_MASTER=$(cat "$dir/master/master.addr")
    export SLOTMARKET_MASTER
    for n in $(seq "$AGENTS"); do
        setsid "$BIN/slotmarket-agent" --master "$SLOTMARKET_MASTER" --name "node-$n" --cert-dir "$WORK/pki" \
            --map-slots 4 --reduce-slots 2 --work-dir "$dir/agents/node-$n" --data-dir "$dir/shared" \
            2>>"$dir/node-$n.log" &
        GROUP[agent-$n]=$!
    done
    for _ in $(seq 100); do
        [ "$(SLOTMARKET_IDENTITY=$who "$BIN/slotmarket" nodes --json | jq '.nodes | length')" = "$AGENTS" ] && return
        sleep 0.1
    done
    echo "$NAME: not every agent registered; see $dir/node-*.log" >&2
    exit 1
}
