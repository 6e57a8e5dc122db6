#!/usr/bin/env bash
# Builds (here, on the developer machine) everything the GPU machine runs, into .devbin/:
# the `ostinato` binary and every test binary of the workspace. The GPU machine has no Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .devbin && mkdir -p .devbin/tests
cargo build --release -p ostinato-cli
cp target/release/ostinato .devbin/
# The graph-API interposer (LD_PRELOAD), for crates/ostinato-preload/tests/gpu/run.sh.
cargo build --release -p ostinato-preload
cp target/release/libostinato_preload.so .devbin/
cargo test --release --workspace --no-run --message-format=json 2>/dev/null \
  | python3 -c '
import json, sys, shutil, os
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        name = m["target"]["name"] + ("-lib" if m["target"]["kind"][0] == "lib" else "")
        shutil.copy(m["executable"], os.path.join(".devbin/tests", m["target"]["name"].replace("-", "_") + "__" + m["target"]["kind"][0]))
'
# Only the tests that touch the GPU (or need NVRTC, which the GPU machine has) run there, with the unit
# tests of the NVIDIA code analysis (ostinato-cuda-code); the rest run in CI.
find .devbin/tests -type f ! -name 'gpu_*' ! -name 'vulkan_*' ! -name 'ostinato_cuda__lib' ! -name 'ostinato_cuda_code__lib' \
  ! -name 'contract_kernels__test' ! -name 'pack_contract__test' ! -name 'ptx_fixtures__test' ! -name 'bench_tiles_contract__test' -delete
strip .devbin/ostinato .devbin/tests/* .devbin/libostinato_preload.so
cp -r examples kernels .devbin/
# The C ABI (library, header), for the C examples the GPU machine compiles against it.
bash scripts/install-c.sh .devbin/c >/dev/null
strip .devbin/c/lib/libostinato.so
# The Python wheel (abi3, manylinux), installed there with pip install --no-deps --target.
if command -v maturin >/dev/null; then
  maturin build --release --manifest-path python/Cargo.toml -o .devbin/wheels
else
  # pip builds the wheel with maturin in an isolated environment (maturin from PyPI).
  python3 -m pip wheel --no-deps -q ./python -w .devbin/wheels || echo "no Python wheel: neither maturin nor pip could build it"
fi
rm .devbin/c/lib/libostinato.a   # the GPU machine links the shared library
# The Llama decode probe (lab/probes/llama-step.sh): its binary where nvcc is found (.cuda/ from
# scripts/fetch-cuda-tools.sh --lab, or the PATH), and the sources it builds from on the GPU machine if not.
mkdir -p .devbin/llama/bin .devbin/llama/src/lab/probes .devbin/llama/src/crates/ostinato-llama
cp -r kernels .devbin/llama/src/ && cp -r crates/ostinato-llama/kernels .devbin/llama/src/crates/ostinato-llama/
cp lab/probes/llama_kernels.cu lab/probes/llama_variants.cu lab/probes/llama_layers_mk.cu .devbin/llama/src/lab/probes/
tools=.cuda/nvidia/cu13
if PATH=$tools/bin:$PATH command -v nvcc >/dev/null; then
  PATH=$tools/bin:$PATH nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels -DOST_TRIGGER=3 -L$tools/lib \
    -o .devbin/llama/bin/llama_kernels lab/probes/llama_kernels.cu
fi
# The test binaries share most of their code: packed, they travel in a ninth of the space (the device
# tool carries 64 MiB at most); scripts/gpu-check.sh unpacks them.
tar -cf - -C .devbin tests | xz -T0 -6 >.devbin/tests.tar.xz && rm -r .devbin/tests
ls -la .devbin
du -sh .devbin
