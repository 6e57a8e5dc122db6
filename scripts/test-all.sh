#!/usr/bin/env bash
# Every test: the Rust workspace's (GPU tests skip with a message where no driver is found), the C
# ABI's (the C and C++ examples built against the installed library) and the Python package's.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace
bash scripts/test-c.sh
bash scripts/test-python.sh
