#!/usr/bin/env bash
# The Python package's tests: a virtual environment (target/py-venv, made once, with numpy, pytest and
# maturin from PyPI), the extension built by maturin (what `pip install ./python` runs, from the same
# pyproject.toml) and installed from its wheel, then pytest on the host backend (Vulkan tests on
# whatever Vulkan device is found; the CUDA tests skip without a GPU and torch).
#
# The extension is built in the dev profile (debug assertions and overflow checks on) in the
# workspace's target dir, so that it reuses the dependencies `cargo test --workspace` and
# scripts/test-c.sh compiled: a release build would compile every dependency again, in a target dir
# of its own. Each step prints a line as it starts; cargo shows its progress.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
say() { echo "test-python: $* [$((SECONDS - start)) s]"; }
venv=target/py-venv
py=$venv/bin/python
if [[ ! -x $py ]] || ! "$py" -c 'import numpy, pytest, maturin' 2>/dev/null; then
  say "making $venv with numpy, pytest and maturin (from PyPI, once)"
  [[ -x $py ]] || python3 -m venv "$venv"
  "$py" -m pip install -q --disable-pip-version-check numpy pytest 'maturin>=1.5,<2'
fi
# Where cargo puts the workspace's artifacts (CARGO_TARGET_DIR, a config's target-dir, or ./target).
target=$(bash scripts/target-dir.sh)
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
say "building the extension (maturin build --profile dev in $target: about 2 min on 2 cores after the C tests, 4 from scratch)"
CARGO_TARGET_DIR=$target "$venv/bin/maturin" build --profile dev -m python/Cargo.toml -o "$wheels"
"$py" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall "$wheels"/ostinato-*.whl
say "building the graph-API interposer (cargo build -p ostinato-preload) for ostinato.adopt's test"
cargo build -q -p ostinato-preload
export OSTINATO_PRELOAD_SO="$target/debug/libostinato_preload.so"
say "running pytest"
# From outside python/, so that the installed package is the one imported.
cd target && "../$py" -m pytest -q ../python/tests
say "done"
