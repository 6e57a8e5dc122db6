#!/usr/bin/env bash
# Runs on the GPU machine (builds nothing): does timing one replay per sample explain why the
# benchmark's 1-block chain rows sit above chain_floor_probe's floor (docs/fences.md §8)?
# chain_floor_probe's (h) lines, then the serial and independent 941 × 1 rows at five placements,
# once with one replay per sample (the default) and once with ten. Logs and reports under $OUT/replays.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}/replays; mkdir -p "$OUT"
BIN=.devbin
export OSTINATO_CACHE_DIR=/tmp/ostinato-nvrtc
source scripts/vulkan-env.sh
status=0
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/machine.log"
$BIN/chain_floor_probe 2>&1 | tee "$OUT/chain-floor.log" || status=1
# --blocks 8192 leaves the 941 × 1 rows as the only grid rows the filter's `b1` can match.
for r in 1 10; do
  $BIN/ostinato bench --blocks 8192 --filter grid/serial/n941/b1,grid/indep/n941/b1 --offsets 0,1024,4096,65536,131072 \
    --replays $r --out "$OUT/bench-replays$r" >"$OUT/bench-replays$r.log" 2>&1 || status=1
  tail -n 3 "$OUT/bench-replays$r.log"
done
exit $status
