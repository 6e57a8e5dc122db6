#!/usr/bin/env bash
# Runs on the GPU machine (builds nothing); docs/fences.md §7-§8. Logs and reports under $OUT/placement.
#   dense:  the serial 941 × 1 row at 64 placements 1 KiB apart (every CUDA arm on the same buffer at
#           each): how often does each arm meet 0.55 µs per dispatch, is Ostinato ever slower than the expert?
#   pinned: host_call_probe pinned to each CPU core in turn: is the host cost of one replay call the core's?
#   arms:   chain_floor_probe, then the serial 941 × 1 row at four placements in five processes, each
#           with other arms beside Ostinato's: does another arm (or the Vulkan context) slow the chain?
# Usage: scripts/study-placement.sh [dense] [pinned] [arms]   (default: dense pinned)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}/placement; mkdir -p "$OUT"
BIN=.devbin
export OSTINATO_CACHE_DIR=/tmp/ostinato-nvrtc
source scripts/vulkan-env.sh
status=0
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$OUT/machine.log"
lscpu | grep -E "Model name|^CPU\(s\)|NUMA|Thread|MHz" >>"$OUT/machine.log"
# --blocks 8192 leaves the 941 × 1 row as the only grid row the filter's `b1` can match.
serial_941x1() { $BIN/ostinato bench --blocks 8192 --filter grid/serial/n941/b1 "$@"; }
for what in "${@:-dense pinned}"; do for w in $what; do case $w in
  dense)
    serial_941x1 --offsets "$(seq -s, 0 1024 64512)" --out "$OUT/bench-dense" >"$OUT/bench-dense.log" 2>&1 || status=1
    tail -n 3 "$OUT/bench-dense.log" ;;
  pinned)
    for cpu in $(seq 0 $(($(nproc) - 1))); do
      echo "== cpu $cpu" >>"$OUT/host-call-pinned.log"
      taskset -c "$cpu" $BIN/host_call_probe >>"$OUT/host-call-pinned.log" 2>&1 || status=1
    done
    grep -E "^== cpu|ostinato-0|captured-0" "$OUT/host-call-pinned.log" ;;
  arms)
    $BIN/chain_floor_probe >"$OUT/chain-floor.log" 2>&1 || status=1
    grep -E "^\((a|e|f)\)" "$OUT/chain-floor.log"
    for arms in ostinato ostinato,captured-pdl ostinato,eager ostinato,ostinato-eager,ostinato-pdl-off all; do
      a=(--arms "$arms"); [[ $arms == all ]] && a=()
      serial_941x1 "${a[@]}" --offsets 0,1024,4096,65536 --out "$OUT/bench-arms-$arms" >"$OUT/bench-arms-$arms.log" 2>&1 || status=1
      echo "-- $arms"; grep -E "^\| grid/serial/n941/b1@" "$OUT/bench-arms-$arms/REPORT.md" | head -4
    done ;;
  *) echo "unknown study $w"; status=1 ;;
esac; done; done
exit $status
