#!/usr/bin/env bash
# Compiles every probe in lab/probes/ (to objects: nothing is linked, no driver is needed) with the flags
# its header gives, so a probe that no longer builds against the kernels it includes is found here and
# not on a GPU machine. Uses nvcc from .cuda/ (scripts/fetch-cuda-tools.sh --lab) or the PATH; prints
# SKIP and exits 0 where there is none. CI runs it.
set -euo pipefail
cd "$(dirname "$0")/../.."
tools=$PWD/.cuda/nvidia/cu13
[ -x "$tools/bin/nvcc" ] && export PATH=$tools/bin:$PATH
if ! command -v nvcc >/dev/null; then
  echo "SKIP lab/scripts/build-probes.sh: no nvcc (scripts/fetch-cuda-tools.sh --lab fetches one)"
  exit 0
fi
inc=$(dirname "$(command -v nvcc)")/../include
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
failed=0
built=(lab/probes/llama_variants.cu lab/probes/llama_layers_mk.cu)  # included by llama_kernels.cu
build() {
  local src=$1
  shift
  built+=("$src")
  if "$@" -c "$src" -o "$out/$(basename "$src").o" >"$out/log" 2>&1; then
    echo "ok    $src"
  else
    echo "FAIL  $src: $*"
    grep -E "error" "$out/log" | head -5
    failed=1
  fi
}
nv=(nvcc -O3 -arch=sm_90 -std=c++17)
build lab/probes/device_graph_launch.cu "${nv[@]}" -rdc=true
build lab/probes/fused_l1.cu "${nv[@]}"
build lab/probes/fused_loop_forms.cu "${nv[@]}"
build lab/probes/fused_softmax.cu "${nv[@]}" -Ikernels -Icrates/ostinato-bench/kernels
build lab/probes/fused_thread_local.cu "${nv[@]}"
build lab/probes/side_by_side.cu "${nv[@]}"
build lab/probes/llama_kernels.cu "${nv[@]}" -Ikernels -DOST_TRIGGER=3
build lab/probes/llama_stream_shapes.cu "${nv[@]}" -Ikernels -DOST_TRIGGER=3
build lab/probes/driver_api_chain.cpp g++ -O2 -std=c++17 -I"$inc"
# A probe added without a line above is a failure too.
for f in lab/probes/*.cu lab/probes/*.cpp; do
  if ! printf '%s\n' "${built[@]}" | grep -qx "$f"; then
    echo "FAIL  $f: not built here (add its flags above)"
    failed=1
  fi
done
exit $failed
