#!/usr/bin/env bash
# Runs `ostinato bench` once per value of one option and keeps each run's REPORT.md and results.json as
# $OUT/<option>-<value>.{md,json}. Runs on the GPU machine from .devbin (scripts/build-devbin.sh).
# Usage: lab/scripts/bench-sweep.sh OPTION "VALUE..." [more bench args]
# The studies behind docs/fences.md:
#   trigger placement:  lab/scripts/bench-sweep.sh trigger "entry after-wait after-writes never disabled" --filter n941,fan/k16,fan/k64,decode --samples 5 --warmups 2
#   PDL block limits:   lab/scripts/bench-sweep.sh trigger "entry after-wait" --filter n941 --blocks 8,32,64,128,256,512,1024 --samples 5 --warmups 2
#   graph shape:        lab/scripts/bench-sweep.sh graph-shape "plan lanes" --filter fan --fans 4,8,16,32,64
#   arm position:       lab/scripts/bench-sweep.sh rotate "0 1 2 3 4 5 6 7" --filter serial/n941/b128,indep/n941/b128
#   mixed builds:       lab/scripts/bench-sweep.sh pdl-mixed-builds "off plain early all" --filter decode
#   graph build:        lab/scripts/bench-sweep.sh graph-build "bulk in-order capture" --filter n941 --blocks 128
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
export OSTINATO_CACHE_DIR=/tmp/ostinato-nvrtc
source scripts/vulkan-env.sh
option=$1; values=$2; shift 2
for v in $values; do
  echo "== --$option $v"
  .devbin/ostinato bench "--$option" "$v" "$@" --out "$OUT/$option-$v" 2>&1 | tail -n 9
  mv "$OUT/$option-$v/REPORT.md" "$OUT/$option-$v.md"; mv "$OUT/$option-$v/results.json" "$OUT/$option-$v.json"; rm -rf "${OUT:?}/$option-$v"
done
