#!/usr/bin/env bash
# Every test: the Rust workspace's (GPU tests skip with a message where no driver is found), the C
# ABI's (the C and C++ examples built against the installed library) and the Python package's. Each
# stage prints a line as it starts, with the time so far; cargo shows its progress.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
stage() { echo; echo "== test-all: $* [$((SECONDS - start)) s so far]"; }
stage "1/3: the Rust workspace's tests (cargo test --workspace; a first build compiles the workspace, about 8 min on 2 cores)"
cargo test --workspace
stage "2/3: the C ABI's tests (scripts/test-c.sh; its dev build reuses the Rust tests' dependencies)"
bash scripts/test-c.sh
stage "3/3: the Python package's tests (scripts/test-python.sh; the extension's dev build reuses the same)"
bash scripts/test-python.sh
echo "== test-all: every stage passed in $((SECONDS - start)) s"
