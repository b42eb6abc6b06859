#!/usr/bin/env bash
# Builds the `slotmarket` command line for x86_64-unknown-linux-musl, an optional second
# build of the CLI alone: every glibc process starts with glibc's CPU and cache probing
# (68 CPUID instructions, each a trap to the hypervisor on a VM: 0.41 ms of a one-spec
# submit's 1.6 ms on the development VM), which a musl binary does not do. Measured in
# docs/benchmarks.md ("seventh round: the CLI's process cost"). The default build
# (`cargo build --release`) is unchanged; everything else keeps glibc.
#
#   scripts/build-cli-musl.sh          # prints the binary's path
#
# `slotmarket demo` runs the programs beside the CLI: copy the binary next to a release
# build's slotmarket-master, slotmarket-agent and slotmarket-task to use it there.
#
# Needs the target (`rustup target add x86_64-unknown-linux-musl`) and `musl-gcc` (Debian's
# musl-tools) for ring's and mimalloc's C code. Differences from the glibc CLI: host names
# resolve through musl's resolver (/etc/hosts and DNS; no other NSS sources), and the
# allocator is mimalloc (cli/src/main.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGET=x86_64-unknown-linux-musl
rustup target list --installed 2>/dev/null | grep -qx "$TARGET" ||
    { echo "the $TARGET target is not installed: rustup target add $TARGET" >&2; exit 1; }
# A position-dependent static binary: no relocations to apply at start (the target's
# default is static-pie, which applies about 13,000 of them).
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C relocation-model=static"
command -v musl-gcc >/dev/null ||
    { echo "musl-gcc is not installed: apt-get install musl-tools" >&2; exit 1; }
export CC_x86_64_unknown_linux_musl=musl-gcc
# mimalloc marks its memory for transparent huge pages; the first 2 MiB page's zeroing
# cost more CPU than a whole submit saves.
export CFLAGS_x86_64_unknown_linux_musl="-DMI_DEFAULT_ALLOW_THP=0"
cargo build --release --quiet --target "$TARGET" -p slotmarket-cli --bin slotmarket
echo "${CARGO_TARGET_DIR:-$PWD/target}/$TARGET/release/slotmarket"
