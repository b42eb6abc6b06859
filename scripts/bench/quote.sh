#!/usr/bin/env bash
# MRM quote latency (issue 9): one quote against 1,000 and 10,000 admitted deadline jobs
# on a 40-node cluster, on the master's own core (`slotmarket-sim bench-quote`). Goal:
# under 5 ms at 10,000. Not a timed test: prints the figures.
#
#   scripts/bench/quote.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet -p slotmarket-master --bin slotmarket-sim
SIM=${CARGO_TARGET_DIR:-target}/release/slotmarket-sim
"$SIM" bench-quote --admitted 1000 --quotes 200
"$SIM" bench-quote --admitted 10000 --quotes 50
