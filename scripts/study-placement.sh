#!/usr/bin/env bash
# Runs on the GPU machine (builds nothing). Two questions of docs/fences.md §7-§8:
# 1. the serial 941 × 1 row at 64 placements 1 KiB apart (every CUDA arm on the same buffer at each):
#    how often does each arm meet 0.55 µs per dispatch, and is Ostinato ever slower than the expert?
# 2. host_call_probe pinned to each CPU core in turn: is the host cost of one replay call the core's?
# Logs and the report under $OUT/placement.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}/placement; mkdir -p "$OUT"
BIN=.devbin
export OSTINATO_CACHE_DIR=/tmp/ostinato-nvrtc
source scripts/vulkan-env.sh
status=0
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/machine.log"
lscpu | grep -E "Model name|^CPU\(s\)|NUMA|Thread|MHz" >>"$OUT/machine.log"
offsets=$(seq -s, 0 1024 64512)
# --blocks 8192 leaves the 941 × 1 row as the only grid row the filter's `b1` can match.
$BIN/ostinato bench --blocks 8192 --filter grid/serial/n941/b1 --offsets "$offsets" --out "$OUT/bench-dense" >"$OUT/bench-dense.log" 2>&1 || status=1
tail -n 3 "$OUT/bench-dense.log"
for cpu in $(seq 0 $(($(nproc) - 1))); do
  echo "== cpu $cpu" >>"$OUT/host-call-pinned.log"
  taskset -c "$cpu" $BIN/host_call_probe >>"$OUT/host-call-pinned.log" 2>&1 || status=1
done
grep -E "^== cpu|ostinato-0|captured-0" "$OUT/host-call-pinned.log"
exit $status
