#!/usr/bin/env bash
# Builds the `slotmarket` command line and writes its man pages (one per command,
# generated from the command-line definition with clap_mangen) into DIR
# (default: target/man). View one with `man -l target/man/slotmarket-run.1`.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-target/man}"
cargo build --quiet -p slotmarket-cli
target="${CARGO_TARGET_DIR:-target}"
"$target/debug/slotmarket" man "$dir"
