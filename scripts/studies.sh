#!/usr/bin/env bash
# Runs on the GPU machine (builds nothing); docs/fences.md §7-§8. Logs and reports under $OUT/studies.
#   replays: chain_floor_probe, then the serial and independent 941 × 1 rows at five placements with one
#           and with ten replays per sample: is timing one replay per sample what keeps the bench's
#           1-block chain rows above the probe's floor?
#   dense:  the serial 941 × 1 row at 64 placements 1 KiB apart (every CUDA arm on the same buffer at
#           each): how often does each arm meet 0.55 µs per dispatch, is Ostinato ever slower than the expert?
#   pinned: host_call_probe pinned to each CPU core in turn: is the host cost of one replay call the core's?
#   arms:   chain_floor_probe, then the serial 941 × 1 row at four placements in five processes, each
#           with other arms beside Ostinato's: does another arm (or the Vulkan context) slow the chain?
#   short:  the 1- and 50-dispatch rows with one replay per sample and with 20, in two processes: are the
#           short rows' losses and wins (identical graphs measured 1.3-2.8 µs) the timing's resolution?
#   clocks: the serial 941 × 1 row at 16 placements in three processes (all arms; Ostinato and the
#           eager baseline; Ostinato and the expert's graph) while nvidia-smi samples the SM clock,
#           P-state and clock-event reasons every 50 ms: does the chain slow down with the GPU's clock?
#   channels: the same 16 placements with Ostinato and the eager baseline, with CUDA_DEVICE_MAX_CONNECTIONS
#           at 1 and at 32 and with Ostinato's replay stream at high priority: does the eager baseline
#           slow the chain through the hardware queue (channel) the two streams share?
#   shift:  eager_shift_probe in each of its modes, eager twice: does an exec that ran before the eager
#           baseline slow down, or only new execs, or only new memory; and which part of the eager
#           baseline's sample does it?
#   regime: the full matrix with --regime multi-stream (plain launches on two streams before the first
#           row), to set beside a default (fresh) matrix of the same call.
# Usage: scripts/studies.sh [replays] [dense] [pinned] [arms] [short] [clocks] [channels] [shift] [regime]   (default: dense pinned)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}/studies; mkdir -p "$OUT"
BIN=.devbin
export OSTINATO_CACHE_DIR=/tmp/ostinato-nvrtc
source scripts/vulkan-env.sh
status=0
nvidia-smi --query-gpu=name,uuid,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$OUT/machine.log"
lscpu | grep -E "Model name|^CPU\(s\)|NUMA|Thread|MHz" >>"$OUT/machine.log"
# --blocks 8192 leaves the 941 × 1 row as the only grid row the filter's `b1` can match.
serial_941x1() { $BIN/ostinato bench --blocks 8192 --filter grid/serial/n941/b1 "$@"; }
for what in "${@:-dense pinned}"; do for w in $what; do case $w in
  replays)
    $BIN/chain_floor_probe 2>&1 | tee "$OUT/chain-floor-replays.log" || status=1
    for r in 1 10; do
      $BIN/ostinato bench --blocks 8192 --filter grid/serial/n941/b1,grid/indep/n941/b1 --offsets 0,1024,4096,65536,131072 \
        --replays $r --out "$OUT/bench-replays$r" >"$OUT/bench-replays$r.log" 2>&1 || status=1
      tail -n 3 "$OUT/bench-replays$r.log"
    done ;;
  short)
    for r in 1 20; do
      $BIN/ostinato bench --filter n1/,n50/ --replays $r --out "$OUT/bench-short-replays$r" >"$OUT/bench-short-replays$r.log" 2>&1 || status=1
      tail -n 9 "$OUT/bench-short-replays$r.log"
    done ;;
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
  clocks)
    q=timestamp,pstate,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
    nvidia-smi --query-gpu=$q --format=csv >/dev/null 2>&1 || q=${q/clocks_event_reasons/clocks_throttle_reasons}
    nvidia-smi --query-gpu=$q --format=csv -lms 50 >"$OUT/clocks.csv" 2>&1 &
    sampler=$!
    for arms in all ostinato,eager ostinato,captured-pdl; do
      a=(--arms "$arms"); [[ $arms == all ]] && a=()
      echo "$(date -u +%Y/%m/%d\ %H:%M:%S.%3N) start $arms" >>"$OUT/clocks-phases.log"
      serial_941x1 "${a[@]}" --offsets "$(seq -s, 0 1024 15360)" --out "$OUT/bench-clocks-$arms" >"$OUT/bench-clocks-$arms.log" 2>&1 || status=1
      echo "$(date -u +%Y/%m/%d\ %H:%M:%S.%3N) end $arms" >>"$OUT/clocks-phases.log"
      echo "-- $arms"; grep -E "^\| grid/serial/n941/b1@" "$OUT/bench-clocks-$arms/REPORT.md" | cut -c1-200
    done
    kill $sampler
    cat "$OUT/clocks-phases.log"; awk -F', ' 'NR>1 {print $3, $2, $7}' "$OUT/clocks.csv" | sort | uniq -c ;;
  channels)
    for v in connections-1 connections-32 priority-high; do
      case $v in
        connections-*) run=(env CUDA_DEVICE_MAX_CONNECTIONS=${v#connections-} $BIN/ostinato); extra=() ;;
        priority-high) run=($BIN/ostinato); extra=(--priority high) ;;
      esac
      "${run[@]}" bench --blocks 8192 --filter grid/serial/n941/b1 --arms ostinato,eager "${extra[@]}" --offsets "$(seq -s, 0 1024 15360)" \
        --out "$OUT/bench-channels-$v" >"$OUT/bench-channels-$v.log" 2>&1 || status=1
      echo "-- $v"; grep -E "^\| grid/serial/n941/b1@" "$OUT/bench-channels-$v/REPORT.md" | cut -c1-200
    done ;;
  shift)
    for m in eager create captured streams one-stream timed copies kept one-launch pdl ostinato-eager ostinato-eager-fan eager-fan eager; do
      $BIN/eager_shift_probe $m 2>&1 | tee -a "$OUT/eager-shift.log" || status=1
    done ;;
  regime)
    $BIN/ostinato bench --regime multi-stream --out "$OUT/bench-multi-stream" >"$OUT/bench-multi-stream.log" 2>&1 || status=1
    tail -n 12 "$OUT/bench-multi-stream.log" ;;
  *) echo "unknown study $w"; status=1 ;;
esac; done; done
exit $status
