#!/usr/bin/env bash
# The block-count sweep behind `auto`'s thresholds (docs/fences.md): serial and independent 941-dispatch
# add_one chains at many block counts, every arm, once per trigger build of the PDL kernels (the
# expert's capture uses that build; Ostinato's ablation `pdl-on` shows the early build up to
# EARLY_TRIGGER_MAX_BLOCKS and that build above). Runs on the GPU machine from .devbin.
# Usage: scripts/pdl-blocks-study.sh [blocks]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export OSTINATO_CACHE_DIR=/tmp/ostinato-nvrtc
BLOCKS=${1:-8,32,64,128,256,512,1024}
for trig in ${TRIGGERS:-entry after-wait}; do
  echo "== trigger $trig"
  .devbin/ostinato bench --trigger "$trig" --filter n941 --blocks "$BLOCKS" --samples 5 --warmups 2 --out "$OUT/blocks-$trig" 2>&1 | tail -n 9
  mv "$OUT/blocks-$trig/REPORT.md" "$OUT/blocks-$trig.md"; mv "$OUT/blocks-$trig/results.json" "$OUT/blocks-$trig.json"; rm -rf "$OUT/blocks-$trig"
done
