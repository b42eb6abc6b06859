#!/usr/bin/env bash
# MRM on a live local cluster (issue 9, the live half): `slotmarket demo --keep` starts a
# master with [admission] mode = "mrm" and `edf` and three agents (2 map slots each) and
# funds the demo user; then JOBS jobs arrive GAP seconds apart, each of MAPS map tasks
# sleeping a random time around TASK_S (±NOISE, uniform), estimated at TASK_S per task.
# Odd jobs are delay-sensitive (buy --earliest), even ones delay-tolerant (buy the
# cheapest: --max-price of their work). Prints one line per job (deadline, finish, met)
# and the share met per class; stops the cluster at the end.
#
#   scripts/mrm/live.sh                       # JOBS=20 GAP=1 MAPS=3 TASK_S=3 NOISE=0.1 SEED=1
set -euo pipefail
cd "$(dirname "$0")/../.."
JOBS=${JOBS:-20} GAP=${GAP:-1} MAPS=${MAPS:-3} TASK_S=${TASK_S:-3} NOISE=${NOISE:-0.1} SEED=${SEED:-1}
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/debug}
export PATH="$BIN:$PATH"
command -v jq >/dev/null || { echo "needs jq" >&2; exit 1; }

kept=$(mktemp)
slotmarket demo --keep --json >/dev/null 2>"$kept"
export SLOTMARKET_MASTER=$(sed -n 's/^ *export SLOTMARKET_MASTER=//p' "$kept")
export SLOTMARKET_CERT_DIR=$(sed -n 's/^ *export SLOTMARKET_CERT_DIR=//p' "$kept")
export SLOTMARKET_IDENTITY=demo
stop=$(sed -n 's/^ *kill -TERM -- \(.*\) && rm -rf \(.*\)$/\1/p' "$kept")
root=$(sed -n 's/^ *kill -TERM -- .* && rm -rf \(.*\)$/\1/p' "$kept")
trap 'kill -TERM -- $stop 2>/dev/null || true; sleep 1; rm -rf "$root" "$kept"' EXIT

RANDOM=$SEED
spec_dir=$(mktemp -d -p "$root")
ids=()
for i in $(seq 1 "$JOBS"); do
  # Task times drawn uniformly in TASK_S × (1 ± NOISE); the estimate is TASK_S.
  cmds=""
  for t in $(seq 0 $((MAPS - 1))); do
    s=$(awk -v b="$TASK_S" -v n="$NOISE" -v r=$RANDOM 'BEGIN { printf "%.2f", b * (1 + n * (2 * r / 32767 - 1)) }')
    cmds="$cmds$t) sleep $s ;; "
  done
  spec="$spec_dir/job-$i.toml"
  cat >"$spec" <<TOML
name = "live-$((i % 2))"
[[stage]]
name = "map"
tasks = $MAPS
slot = "map"
command = "case {task} in $cmds esac"
[estimate]
map_task_ms = $((TASK_S * 1000))
spread_pct = 20
TOML
  if ((i % 2)); then
    choice=(--earliest)
  else
    work=$(slotmarket --json quote "$spec" | jq -r '.curve[-1].price')
    choice=(--max-price "$work")
  fi
  if out=$(slotmarket --json submit "$spec" "${choice[@]}" 2>&1); then
    ids+=("$(jq -r .job <<<"$out")")
  else
    echo "job $i refused: $out" >&2
  fi
  sleep "$GAP"
done

for id in "${ids[@]}"; do
  until slotmarket --json status "$id" | jq -e '.state | test("completed|failed|cancelled")' >/dev/null; do sleep 1; done
done
slotmarket --json jobs --all | jq -r '
  [.jobs[] | select(.deadline_ms != null and (.name | startswith("live-")))] | sort_by(.id | ltrimstr("j") | tonumber) | .[] |
  [.id, .name, ((.deadline_ms - .submitted_ms) / 1000), ((.finished_ms - .submitted_ms) / 1000),
   (if .finished_ms <= .deadline_ms then "met" else "missed" end), .price] | @tsv' |
  awk 'BEGIN { print "job\tclass\tdeadline_s\tfinished_s\tmet\tprice" }
       { print; c = ($2 == "live-1") ? "sensitive" : "tolerant"; n[c]++; if ($5 == "met") m[c]++ }
       END { for (c in n) printf "%s: %d/%d met\n", c, m[c], n[c] }'
