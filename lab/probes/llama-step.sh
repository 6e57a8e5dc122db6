#!/usr/bin/env bash
# The Llama decode study in one GPU-machine call, from a folder D holding what was built on the developer
# machine (the GPU machine has no Rust toolchain):
#   D/bin/llama_kernels*  lab/probes/llama_kernels.cu built with nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels
#                         -I<dir of llama_prev.cu> -DOST_TRIGGER=3 (variants: _2b3 with -DLB_MIN_BLOCKS=2
#                         -DLB_STAGES=3, _s1 with -DLB_STATIC_ROUNDS=1)
#   D/src/                the sources, to build there when the binaries do not run: kernels/,
#                         crates/ostinato-llama/kernels/llama{_common,}.cu, lab/probes/llama_{kernels,variants}.cu and
#                         llama_prev.cu (the pack's llama.cu before the bulk-copy projections)
# Stages: attributes; the per-kernel check against double precision (a failure is reported, the timing
# still runs); kernels alone and back to back; the step per combo and position; the variants; then
# compute-sanitizer memcheck and racecheck on a one-layer model. Everything goes to $OUT/run.log; a
# summary is printed last.
#   bash llama-step.sh D
set -u
D=$(cd "${1:?folder}" && pwd)
OUT=${OUT:-/tmp/llama-out}
mkdir -p "$OUT"
LOG=$OUT/run.log
# Variants: "suffix:nvcc flags" separated by ';' (VARIANTS="" builds none); each is timed on VCOMBOS.
VARIANTS=${VARIANTS-"_2b3:-DLB_MIN_BLOCKS=2 -DLB_STAGES=3;_s1:-DLB_STATIC_ROUNDS=1"}
VCOMBOS=${VCOMBOS:-bbbm,bbbd}
IFS=';' read -ra VDEFS <<<"$VARIANTS"
COMBOS=${COMBOS:-pppm,pppd,bbbm,bbbd,pbbd,bpbd,bbpd}
say() { echo "== $*" | tee -a "$LOG"; }
cd "$D"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >>"$LOG" 2>&1
say attrs
if ! bin/llama_kernels attrs >>"$LOG" 2>&1; then
  say "prebuilt binaries do not run here: building"
  mkdir -p bin
  build() { nvcc -O3 -arch=sm_90 -std=c++17 -Isrc/kernels -Isrc -DOST_TRIGGER=3 $2 -o "bin/llama_kernels$1" src/lab/probes/llama_kernels.cu >"$OUT/build$1.log" 2>&1; }
  build "" "" &
  for v in "${VDEFS[@]}"; do build "${v%%:*}" "${v#*:}" & done
  wait
  bin/llama_kernels attrs >>"$LOG" 2>&1 || { say "BUILD FAILED"; tail -20 "$OUT/build.log"; exit 1; }
fi
say check
timeout 150 bin/llama_kernels check 16,32 >>"$LOG" 2>&1; rc=$?; echo "check rc $rc" | tee -a "$LOG"
if [[ $rc == 124 ]]; then  # a hang: time what does not use the streaming kernels, then stop
  say "step without the bulk kernels"
  timeout 30 bin/llama_kernels step 16,32 0 pppm,pppd >>"$LOG" 2>&1; echo "step rc $?" | tee -a "$LOG"
  grep -E "^== |FAIL|rc [0-9]|^step " "$LOG"; exit 1
fi
say kernels
timeout 30 bin/llama_kernels kernels 32 >>"$LOG" 2>&1; echo "kernels rc $?" | tee -a "$LOG"
say step
timeout 45 bin/llama_kernels step 16,32 0 $COMBOS >>"$LOG" 2>&1; echo "step rc $?" | tee -a "$LOG"
for vd in "${VDEFS[@]}"; do
  v=${vd%%:*}
  say "variant $v (${vd#*:})"
  timeout 20 bin/llama_kernels$v attrs >>"$LOG" 2>&1
  timeout 150 bin/llama_kernels$v check 32 >>"$LOG" 2>&1; echo "check$v rc $?" | tee -a "$LOG"
  timeout 20 bin/llama_kernels$v step 32 0 $VCOMBOS >>"$LOG" 2>&1; echo "step$v rc $?" | tee -a "$LOG"
  timeout 20 bin/llama_kernels$v kernels 32 >>"$LOG" 2>&1; echo "kernels$v rc $?" | tee -a "$LOG"
done
say memcheck
timeout 45 compute-sanitizer --tool memcheck --leak-check no bin/llama_kernels sanitize 16 >>"$LOG" 2>&1; echo "memcheck rc $?" | tee -a "$LOG"
say racecheck
timeout 45 compute-sanitizer --tool racecheck bin/llama_kernels sanitize 16 >>"$LOG" 2>&1; echo "racecheck rc $?" | tee -a "$LOG"
say summary
grep -E "^== |failures|FAIL|rc [0-9]|ERROR SUMMARY|RACECHECK SUMMARY|^step |^  (llama_|attn|o_dense|ffn_in|down|lm_head)|^bulk" "$LOG" | grep -v "^  .* ok$" | tail -120
