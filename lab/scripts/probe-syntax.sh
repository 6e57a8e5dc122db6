#!/usr/bin/env bash
# Parses and type-checks the Llama probe (lab/probes/llama_kernels.cu, host and device code) with g++
# against a declarations-only shim of CUDA (lab/probes/shim/cuda_runtime.h), on a machine without nvcc:
# what the GPU machine's nvcc build would refuse for arity, types and names is caught here. The
# device code's real compile is NVRTC's (crates/ostinato-llama/tests/pack_contract.rs and the probe
# build itself).
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=lab/probes/.syntax-check.cpp
trap 'rm -f "$tmp"' EXIT
# The one triple-chevron launch is not C++: a plain call stands in for it.
sed 's/<<<[^>]*>>>//' lab/probes/llama_kernels.cu >"$tmp"
g++ -fsyntax-only -std=c++17 -include lab/probes/shim/cuda_runtime.h -Ilab/probes/shim -Ikernels -w "$tmp"
echo "lab/probes/llama_kernels.cu: parses and type-checks against the shim"
