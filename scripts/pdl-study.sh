#!/usr/bin/env bash
# The PDL policy study (docs/fences.md): the same rows with every arm's kernels compiled for each
# trigger placement; each report has the PDL-on and PDL-off ablations side by side. Runs on the GPU
# machine from .devbin (see scripts/build-devbin.sh). Usage: scripts/pdl-study.sh [filter]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export OSTINATO_CACHE_DIR=/tmp/ostinato-nvrtc
FILTER=${1:-n941,fan/k16,fan/k64,decode}
for trig in ${TRIGGERS:-entry after-wait after-writes never disabled}; do
  echo "== trigger $trig"
  .devbin/ostinato bench --trigger "$trig" --filter "$FILTER" --samples 5 --warmups 2 --out "$OUT/pdl-$trig" 2>&1 | tail -n 8
  mv "$OUT/pdl-$trig/REPORT.md" "$OUT/pdl-$trig.md"; mv "$OUT/pdl-$trig/results.json" "$OUT/pdl-$trig.json"; rm -rf "$OUT/pdl-$trig"
done
