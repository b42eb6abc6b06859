# Shared by the benchmark scripts (sourced, not run): a scratch directory, the daemons
# started there, and their removal however the script ends.
#
#   bench_workdir NAME          # WORK: a fresh scratch directory; the trap stops and removes all
#   start_master BIN_DIR DIR    # a master on a free loopback port; sets MASTER_ADDR, MASTER_PID
#   start_pair BIN_DIR DIR [N]  # the same plus one agent (N map slots, 8 by default) connected;
#                               # sets AGENT_PID
#   start_sleep_slot BIN_DIR DIR NAME TASKS
#                               # start_pair with one map slot, SLOTMARKET_* exported for the
#                               # CLI, and DIR/NAME.toml: one job of TASKS x `sleep 0.5`

PIDS=()

bench_workdir() { # name
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/slotmarket-$1.XXXXXX")
    trap bench_cleanup EXIT INT TERM
    bench_fs_note "$WORK"
}

# Warns when DIR is on ext4 without a journal. There every new inode (a task's directory
# and logs) first skips the free inodes deleted in the last 1-6 minutes (the kernel's
# `recently_deleted`), so each earlier run's removed files make the agents slower:
# 0.37, 0.63 then 1.56 s of agent CPU for the same 1,000 tasks in three runs back to back
# (docs/benchmarks.md, launch path, tenth round).
bench_fs_note() { # dir
    local dev fstype
    read -r dev fstype < <(findmnt -no SOURCE,FSTYPE -T "$1" 2>/dev/null) || return 0
    local options=/proc/fs/ext4/${dev#/dev/}/options
    if [ "$fstype" = ext4 ] && [ -r "$options" ] && ! grep -q '^data=' "$options"; then
        echo "note: $1 is on ext4 without a journal ($dev): files deleted in the last minutes slow" \
            "every new one; for steady figures set TMPDIR to another file system" >&2
    fi
}

bench_cleanup() {
    for pid in "${PIDS[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in "${PIDS[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}

start_master() { # bin_dir dir
    local bin=$1 dir=$2
    "$bin/slotmarket" pki init --dir "$dir/pki" >/dev/null
    setsid "$bin/slotmarket-master" --listen 127.0.0.1:0 --data-dir "$dir/master" --cert-dir "$dir/pki" \
        2>"$dir/master.log" &
    MASTER_PID=$!
    PIDS+=($!)
    disown # no "Killed" notice from bash when cleanup ends it
    for _ in $(seq 100); do [ -s "$dir/master/master.addr" ] && break; sleep 0.05; done
    MASTER_ADDR=$(cat "$dir/master/master.addr")
}

start_pair() { # bin_dir dir [map_slots]
    local bin=$1 dir=$2 map_slots=${3:-8}
    start_master "$bin" "$dir"
    "$bin/slotmarket" pki issue --dir "$dir/pki" --role agent --name node-1 >/dev/null
    SLOTMARKET_MASTER=$MASTER_ADDR setsid "$bin/slotmarket-agent" --name node-1 --cert-dir "$dir/pki" --map-slots "$map_slots" --reduce-slots 1 \
        --work-dir "$dir/agent" --data-dir "$dir/shared" 2>"$dir/node-1.log" &
    AGENT_PID=$!
    PIDS+=($!)
    disown
    for _ in $(seq 100); do
        SLOTMARKET_MASTER=$MASTER_ADDR SLOTMARKET_CERT_DIR=$dir/pki SLOTMARKET_IDENTITY=admin \
            "$bin/slotmarket" nodes --json | grep -q '"connected": *true' && break
        sleep 0.1
    done
}

start_sleep_slot() { # bin_dir dir name tasks
    local bin=$1 dir=$2 name=$3 tasks=$4
    mkdir -p "$dir"
    start_pair "$bin" "$dir" 1
    export SLOTMARKET_MASTER=$MASTER_ADDR SLOTMARKET_CERT_DIR=$dir/pki SLOTMARKET_IDENTITY=admin
    printf 'name = "%s"\n[[stage]]\nname = "run"\ntasks = %d\nslot = "map"\ncommand = "sleep 0.5"\n' \
        "$name" "$tasks" >"$dir/$name.toml"
}

# CPU seconds (user + system) process $1 has used so far.
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$1/stat"; }
