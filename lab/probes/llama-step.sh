#!/usr/bin/env bash
# The Llama decode study in one GPU-machine call, from a checkout of the repository (nvcc there builds
# lab/probes/llama_kernels.cu; nothing else is needed): builds the probe in its variants in parallel,
# then the per-kernel check against double precision (1B and 3B shapes; a failure is reported, the
# timing still runs), the designs table at Llama-3.2-1B's shape (every kernel alone and back to back,
# the per-head hand-off variants, the step per combo at positions 128 and 1,024), the 3B shape's kernels
# and step, the streaming-projection variants (down toward the calibration's 8.7 µs), and (MEMCHECK=1)
# compute-sanitizer memcheck on a one-layer model. Everything goes to $OUT/run.log; a summary is printed
# last. Expected time on an H200: builds ~1.5 minutes (five nvcc runs in parallel), runs under 2
# (memcheck ~1 more).
#   OUT=/some/dir [MEMCHECK=1] [PREBUILT=dir] bash lab/probes/llama-step.sh   (PREBUILT: the five binaries,
#   built elsewhere with the flags below, instead of building here)
# Variants (nvcc flags; the base build triggers dependents after the wait, as the pack's main build):
#   _e     -DOST_TRIGGER=1: every kernel lets its dependents launch at entry (before its wait)
#   _2b3   -DLB_BUDGET=98304 -DLB_MIN_BLOCKS=2: streaming blocks of 3 x 32 KiB stages, two per SM
#   _2b3e  both (the calibration's "bd 32Kx3 g2", which reached 8.71 µs for the down projection)
#   _s1    -DLB_STATIC_ROUNDS=1: one static round of tiles before the tickets
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/llama-out}
BIN=$OUT/bin
mkdir -p "$BIN"
LOG=$OUT/run.log
: >"$LOG"
say() { echo "== $*" | tee -a "$LOG"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >>"$LOG" 2>&1
nvcc --version | tail -1 >>"$LOG" 2>&1
say build
start=$(date +%s)
build() {
  nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels -Icrates/ostinato-llama/kernels $2 -o "$BIN/llama_kernels$1" lab/probes/llama_kernels.cu >"$OUT/build$1.log" 2>&1 \
    || echo "BUILD FAILED$1" | tee -a "$LOG"
}
if [[ -n ${PREBUILT:-} ]]; then
  # Binaries built elsewhere with the same flags (nvcc 13.0 for sm_90, e.g. CUDA's pip wheels).
  cp "$PREBUILT"/llama_kernels* "$BIN"/ && echo "prebuilt: $PREBUILT" | tee -a "$LOG"
else
  build "" "-DOST_TRIGGER=3" & build _e "-DOST_TRIGGER=1" & build _2b3 "-DOST_TRIGGER=3 -DLB_BUDGET=98304 -DLB_MIN_BLOCKS=2" &
  build _2b3e "-DOST_TRIGGER=1 -DLB_BUDGET=98304 -DLB_MIN_BLOCKS=2" & build _s1 "-DOST_TRIGGER=3 -DLB_STATIC_ROUNDS=1" & wait
fi
echo "build took $(( $(date +%s) - start )) s" | tee -a "$LOG"
P=$BIN/llama_kernels
if [[ ! -x $P ]]; then tail -30 "$OUT/build.log" | tee -a "$LOG"; exit 1; fi
run() {  # run NAME TIMEOUT CMD...: the command's output to the log, its status noted
  local name=$1 t=$2; shift 2
  say "$name"
  timeout "$t" "$@" >>"$LOG" 2>&1; echo "$name rc $?" | tee -a "$LOG"
}
run attrs 20 "$P" attrs
run "check 1b" 120 "$P" check 16,32
run "check 3b" 150 env LLAMA_SHAPE=3b "$P" check 16
run "designs 1b" 90 "$P" designs 16
run "kernels 3b" 60 env LLAMA_SHAPE=3b "$P" kernels 16
run "step 3b" 60 env LLAMA_SHAPE=3b "$P" step 16 0 base,flag 128,1024
for v in _e _2b3 _2b3e _s1; do
  [[ -x $P$v ]] || continue
  run "attrs$v" 20 "$P$v" attrs
  run "kernels$v" 40 "$P$v" kernels 16
  run "step$v" 40 "$P$v" step 16 0 base,flag 1024
done
if [[ ${MEMCHECK:-0} == 1 ]]; then run memcheck 90 compute-sanitizer --tool memcheck --leak-check no "$P" sanitize 16; fi
say summary
grep -E "^== |failures|FAIL|rc [0-9]+$|ERROR SUMMARY|^step |^  (llama_|ffn_in|attn|qkv)|^shape|n/a" "$LOG" | grep -v " ok$" | tail -150
