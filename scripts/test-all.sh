#!/usr/bin/env bash
# Every test, in three stages; each announces itself on a line of its own and says how long it took
# (a failing stage stops the script with its exit status):
#   1. Rust    `cargo test --workspace`: every crate's unit, integration and doc tests (the README's
#              Rust example among them). Tests that need a GPU or a Vulkan device print SKIP and pass
#              where no CUDA driver or Vulkan driver is found (lavapipe runs the Vulkan ones on a CPU).
#   2. C       scripts/test-c.sh: the C ABI installed under a temporary prefix, the C and C++ examples
#              built against it with pkg-config and run.
#   3. Python  scripts/test-python.sh: the pyo3 extension built by maturin into a virtual environment,
#              then its pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
stage() {
  local name=$1 start=$SECONDS
  shift
  echo "== test-all: $name: $* =="
  "$@"
  echo "== test-all: $name took $((SECONDS - start)) s =="
}
stage "1/3 Rust" cargo test --workspace
stage "2/3 C" bash scripts/test-c.sh
stage "3/3 Python" bash scripts/test-python.sh
