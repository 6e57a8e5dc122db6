#!/usr/bin/env bash
# Here (a machine without a GPU): NVIDIA's CUDA compiler tools from PyPI, unpacked into .cuda/ (ignored):
# NVRTC and nvdisasm (scripts/cuda-tools.txt), and with --lab also nvcc, ptxas, the headers and cuobjdump
# (scripts/cuda-tools-lab.txt). Every wheel is pinned by hash. scripts/test-all.sh uses .cuda/ where it
# exists, so the tests that need a compiler but no GPU (the pack contracts, the fusion and hand-off
# sources, the tile-map checks of generated PTX) run instead of printing SKIP. By hand:
#   export OSTINATO_NVRTC=$PWD/.cuda/nvidia/cu13/lib/libnvrtc.so.13 OSTINATO_NVDISASM=$PWD/.cuda/nvidia/cu13/bin/nvdisasm
#   export PATH=$PWD/.cuda/nvidia/cu13/bin:$PATH     # with --lab: nvcc, ptxas, cuobjdump
set -euo pipefail
cd "$(dirname "$0")/.."
lists=(scripts/cuda-tools.txt)
[ "${1:-}" = --lab ] && lists+=(scripts/cuda-tools-lab.txt)
py=$(command -v python3 || command -v python)
wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
for l in "${lists[@]}"; do
  "$py" -m pip download -q --disable-pip-version-check --no-deps --only-binary :all: --require-hashes -r "$l" -d "$wheels"
done
mkdir -p .cuda
for w in "$wheels"/*.whl; do
  "$py" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$w" .cuda
done
# NVRTC's alternative builds (`*.alt.*`, 110 MB) are not loaded by anything here.
rm -f .cuda/nvidia/cu13/lib/*.alt.*
# zipfile keeps no modes: the programs are made executable again.
chmod +x .cuda/nvidia/cu13/bin/* .cuda/nvidia/cu13/nvvm/bin/* 2>/dev/null || true
echo "CUDA tools in .cuda/nvidia/cu13: $(ls .cuda/nvidia/cu13/bin .cuda/nvidia/cu13/lib 2>/dev/null | grep -v ':$' | tr '\n' ' ')"
