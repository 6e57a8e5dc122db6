#!/usr/bin/env bash
# Every test, in three stages; each announces itself on a line of its own and says how long it took
# (a failing stage stops the script with its exit status):
#   1. Rust    `cargo test --workspace`: every crate's unit, integration and doc tests (the README's
#              Rust example among them). Tests that need a GPU or a Vulkan device print SKIP and pass
#              where no CUDA driver or Vulkan driver is found (lavapipe runs the Vulkan ones on a CPU).
#              A first build compiles the workspace (about 8 minutes on 2 cores).
#   2. C       scripts/test-c.sh: the C ABI installed under a temporary prefix (its dev build reuses
#              the Rust tests' dependencies), the C and C++ examples built against it and run, and the
#              graph-API interposer's C tests against a table driver.
#   3. Python  scripts/test-python.sh: the pyo3 extension built by maturin (dev profile, the same
#              target folder) into a virtual environment, then its pytest suite.
# Where scripts/fetch-cuda-tools.sh put NVIDIA's compiler tools in .cuda/, the tests that need NVRTC or
# nvdisasm but no GPU run with them (without, they print SKIP); a path set already is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
tools=$PWD/.cuda/nvidia/cu13
if [ -e "$tools/lib/libnvrtc.so.13" ]; then
  export OSTINATO_NVRTC=${OSTINATO_NVRTC:-$tools/lib/libnvrtc.so.13}
  [ -x "$tools/bin/nvdisasm" ] && export OSTINATO_NVDISASM=${OSTINATO_NVDISASM:-$tools/bin/nvdisasm}
  echo "== test-all: NVRTC $OSTINATO_NVRTC, nvdisasm ${OSTINATO_NVDISASM:-not found} =="
fi
start=$SECONDS
stage() {
  local name=$1 at=$SECONDS
  shift
  echo "== test-all: $name: $* [$((at - start)) s so far] =="
  "$@"
  echo "== test-all: $name took $((SECONDS - at)) s =="
}
stage "1/3 Rust" cargo test --workspace
stage "2/3 C" bash scripts/test-c.sh
stage "3/3 Python" bash scripts/test-python.sh
echo "== test-all: every stage passed in $((SECONDS - start)) s =="
