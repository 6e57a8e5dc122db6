#!/usr/bin/env bash
# The graph-shape study behind `auto`'s lane band (docs/fences.md): fan-out/fan-in rows of several
# widths with the Ostinato arms forced to each shape (plan: one dependency per plan edge; lanes: the
# plan's lanes as PDL chains). Runs on the GPU machine from .devbin. Usage: scripts/shape-study.sh [fans]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export OSTINATO_CACHE_DIR=/tmp/ostinato-nvrtc
FANS=${1:-4,8,16,32,64}
for shape in ${SHAPES:-plan lanes}; do
  echo "== graph shape $shape"
  .devbin/ostinato bench --graph-shape "$shape" --filter fan --fans "$FANS" --samples 7 --warmups 3 --out "$OUT/shape-$shape" 2>&1 | tail -n 9
  mv "$OUT/shape-$shape/REPORT.md" "$OUT/shape-$shape.md"; mv "$OUT/shape-$shape/results.json" "$OUT/shape-$shape.json"; rm -rf "$OUT/shape-$shape"
done
