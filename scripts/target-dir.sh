#!/usr/bin/env bash
# Prints the directory where cargo puts the workspace's artifacts: CARGO_TARGET_DIR, a config's
# target-dir, or ./target (what `cargo metadata` says).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo metadata --format-version 1 --no-deps | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
