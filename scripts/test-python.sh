#!/usr/bin/env bash
# The Python package's tests: a fresh virtual environment (target/py-venv), `pip install ./python`
# (maturin builds the extension), then pytest on the host backend (the CUDA tests skip without a GPU
# and torch).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/py-venv
[[ -x $venv/bin/python ]] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy pytest
"$venv/bin/python" -m pip install -q --disable-pip-version-check ./python
# From outside python/, so that the installed package is the one imported.
cd target && "../$venv/bin/python" -m pytest -q ../python/tests
