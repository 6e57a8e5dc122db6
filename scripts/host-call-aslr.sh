#!/usr/bin/env bash
# Runs on the GPU machine (builds nothing); docs/fences.md §7. Is a process's host cost of a replay call
# set by its address-space layout? host_call_probe six times with address-space randomization off
# (`setarch -R`) and six times as usual, alternating; prints each process's level (the median of its
# 12 graphs' medians) and keeps the logs under $OUT/host-call-aslr.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}/host-call-aslr; mkdir -p "$OUT"
status=0
level() { grep -E '^\| (ostinato|captured)-' "$1" | awk -F'|' '{print $3}' | sort -n | awk '{a[NR]=$1} END {printf "%.2f (graphs %.2f-%.2f)", (a[6]+a[7])/2, a[1], a[NR]}'; }
for i in 1 2 3 4 5 6; do
  setarch "$(uname -m)" -R .devbin/host_call_probe >"$OUT/aslr-off-$i.log" 2>&1 || status=1
  .devbin/host_call_probe >"$OUT/aslr-on-$i.log" 2>&1 || status=1
  echo "process $i: randomization off $(level "$OUT/aslr-off-$i.log"); on $(level "$OUT/aslr-on-$i.log")"
done | tee "$OUT/levels.txt"
exit $status
