#!/usr/bin/env bash
# The Llama decode study in one GPU-machine call, from a folder D holding what was built on the developer
# machine (the GPU machine has no Rust toolchain; scripts/fetch-cuda-tools.sh --lab gives the developer
# machine nvcc):
#   D/bin/llama_kernels*  lab/probes/llama_kernels.cu built with nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels
#                         -DOST_TRIGGER=3 (and -L.cuda/nvidia/cu13/lib with the fetched tools); variants with
#                         their own defines (VARIANTS below)
#   D/src/                the sources, to build there when the binaries do not run: kernels/,
#                         crates/ostinato-llama/kernels/llama{_common,}.cu, lab/probes/llama_{kernels,variants,layers_mk}.cu
# Stages: attributes; the per-kernel check against double precision (a failure is reported, the timing
# still runs); the cooperative launch; gate/up with its own tiles already in L2 (l2); kernels alone and
# back to back; the step per combo and position; the build variants; then compute-sanitizer memcheck
# and racecheck on a one-layer model (RACECHECK_VARIANTS=1: racecheck on each variant too). Everything goes to $OUT/run.log;
# a summary is printed last.
#   bash llama-step.sh D
set -u
export PATH=/usr/local/cuda/bin:$PATH  # compute-sanitizer and ncu
D=$(cd "${1:?folder}" && pwd)
OUT=${OUT:-/tmp/llama-out}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)  # absolute: the script runs from D
LOG=$OUT/run.log
# Build variants: "suffix:nvcc flags" separated by ';' (none by default); each is checked and timed on VCOMBOS.
VARIANTS=${VARIANTS-""}
VCOMBOS=${VCOMBOS:-0,f6}
IFS=';' read -ra VDEFS <<<"$VARIANTS"
# Combos: rounds of gate/up's first tiles attention asks L2 for (llama_attn_pf; 0 is the pack's attention),
# after an f for gate/up + down as one kernel (llama_ffn_fused), after a c for that kernel launched
# cooperative (last: the coop stage says first whether the driver takes it with PDL in a graph), after a
# t for it with every tile by ticket (llama_ffn_fused_t, no residency needed).
COMBOS=${COMBOS:-0,2,4,6,f0,f6,t0,t6,c6}
SPLITS=${SPLITS:-32}
# Stages to run (default all but ncu): PROBE_STAGES="check l2 kernels step" leaves out the others. ncu:
# Nsight Compute (clocks left as they are) on the streaming kernels as the check launches them, the
# pack's build and each variant's, into $OUT/ncu<suffix>.{ncu-rep,txt,-sass.csv}; on the fused FFN; and
# on one layer's kernels and the LM head as the step launches them (ncu-layer, ncu-head); on
# llama_layers_mk (ncu-mk).
PROBE_STAGES=" ${PROBE_STAGES:-check coop l2 kernels step variants memcheck racecheck} "
on() { [[ "$PROBE_STAGES" == *" $1 "* ]]; }
say() { echo "== $*" | tee -a "$LOG"; }
cd "$D"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >>"$LOG" 2>&1
say attrs
if ! bin/llama_kernels attrs >>"$LOG" 2>&1; then
  say "prebuilt binaries do not run here: building"
  mkdir -p bin
  build() { nvcc -O3 -arch=sm_90 -std=c++17 -Isrc/kernels -DOST_TRIGGER=3 $2 -o "bin/llama_kernels$1" src/lab/probes/llama_kernels.cu >"$OUT/build$1.log" 2>&1; }
  build "" "" &
  for v in "${VDEFS[@]}"; do build "${v%%:*}" "${v#*:}" & done
  wait
  bin/llama_kernels attrs >>"$LOG" 2>&1 || { say "BUILD FAILED"; tail -20 "$OUT/build.log"; exit 1; }
fi
if on check; then
  say check
  timeout 150 bin/llama_kernels check "$SPLITS" >>"$LOG" 2>&1; rc=$?; echo "check rc $rc" | tee -a "$LOG"
  if [[ $rc == 124 ]]; then say "check hung: stopping"; grep -E "^== |FAIL|rc [0-9]" "$LOG"; exit 1; fi
fi
if on coop; then
  say coop
  timeout 30 bin/llama_kernels coop "$SPLITS" >>"$LOG" 2>&1; echo "coop rc $?" | tee -a "$LOG"
fi
if on l2; then
  say l2
  timeout 60 bin/llama_kernels l2 "$SPLITS" >>"$LOG" 2>&1; echo "l2 rc $?" | tee -a "$LOG"
fi
if on kernels; then
  say kernels
  timeout 60 bin/llama_kernels kernels "$SPLITS" >>"$LOG" 2>&1; echo "kernels rc $?" | tee -a "$LOG"
fi
if on step; then
  say step
  timeout 90 bin/llama_kernels step "$SPLITS" 0 "$COMBOS" >>"$LOG" 2>&1; echo "step rc $?" | tee -a "$LOG"
fi
ALL_VDEFS=("${VDEFS[@]}")  # the ncu stage profiles every build, the variants stage or not
on variants || VDEFS=()
for vd in "${VDEFS[@]}"; do
  v=${vd%%:*}
  say "variant $v (${vd#*:})"
  timeout 20 bin/llama_kernels$v attrs >>"$LOG" 2>&1
  timeout 150 bin/llama_kernels$v check "$SPLITS" >>"$LOG" 2>&1; echo "check$v rc $?" | tee -a "$LOG"
  timeout 30 bin/llama_kernels$v step "$SPLITS" 0 "$VCOMBOS" >>"$LOG" 2>&1; echo "step$v rc $?" | tee -a "$LOG"
  timeout 30 bin/llama_kernels$v kernels "$SPLITS" >>"$LOG" 2>&1; echo "kernels$v rc $?" | tee -a "$LOG"
done
# profile NAME BUILD LIMIT "PROBE ARGS" NCU-ARGS...: the probe (e.g. "check 32") under ncu into
# $OUT/NAME.ncu-rep, then the sections as text (NAME.txt) and each SASS instruction's warp-state samples
# (NAME-sass.csv), which tell the producer warp's stalls from the consumers'.
profile() {
  local name=$1 build=$2 limit=$3 args=$4
  shift 4
  say "$name"
  # shellcheck disable=SC2086 # the probe's arguments, split into words
  timeout "$limit" ncu --clock-control none "$@" \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --section SourceCounters -f -o "$OUT/$name" "bin/llama_kernels$build" $args >"$OUT/$name.log" 2>&1
  echo "$name rc $?" | tee -a "$LOG"
  ncu -i "$OUT/$name.ncu-rep" >"$OUT/$name.txt" 2>&1
  ncu -i "$OUT/$name.ncu-rep" --page source --csv --print-source sass >"$OUT/$name-sass.csv" 2>&1
}
# NCU_PROFILES: which of the ncu stage's profiles run (default all).
NCU_PROFILES=" ${NCU_PROFILES:-streaming fused layer head mk} "
wants() { [[ "$NCU_PROFILES" == *" $1 "* ]]; }
if on ncu; then
  if wants streaming; then
    for b in "" $(for vd in "${ALL_VDEFS[@]}"; do echo "${vd%%:*}"; done); do
      profile "ncu$b" "$b" 150 "check $SPLITS" --kernel-name regex:'^llama_(ffn_in|down|lm_head)$' --launch-skip 6 --launch-count 6
    done
  fi
  # The fused FFN (version 11, slower than the two kernels it replaces).
  wants fused && profile ncu-fused "" 120 "check $SPLITS" --kernel-name llama_ffn_fused --launch-skip 2 --launch-count 2
  # What bounds each kernel of the step: layer 7's five kernels of the second step at position 1,024
  # (80 of them a step: skip a step and seven layers) and the second step's LM head.
  wants layer && profile ncu-layer "" 120 "profile $SPLITS 0 0 1024" --kernel-name regex:'^llama_(qkv|attn|o|ffn_in|down)$' --launch-skip 115 --launch-count 5
  wants head && profile ncu-head "" 90 "profile $SPLITS 0 0 1024" --kernel-name llama_lm_head --launch-skip 1 --launch-count 1
  # Every layer as one persistent kernel (version 21, combo m): the second step's launch.
  wants mk && profile ncu-mk "" 150 "profile $SPLITS 0 m 1024" --kernel-name llama_layers_mk --launch-skip 1 --launch-count 1
fi
if on memcheck; then
  say memcheck
  timeout 60 compute-sanitizer --tool memcheck --leak-check no bin/llama_kernels sanitize "$SPLITS" >>"$LOG" 2>&1; echo "memcheck rc $?" | tee -a "$LOG"
fi
if on racecheck; then
  say racecheck
  timeout 60 compute-sanitizer --tool racecheck bin/llama_kernels sanitize "$SPLITS" >>"$LOG" 2>&1; echo "racecheck rc $?" | tee -a "$LOG"
fi
# RACECHECK_VARIANTS=1: racecheck on each build variant too (variants that change the kernels' synchronisation).
if [[ ${RACECHECK_VARIANTS:-0} == 1 ]]; then
  for vd in "${VDEFS[@]}"; do
    v=${vd%%:*}
    say "racecheck$v"
    timeout 60 compute-sanitizer --tool racecheck bin/llama_kernels$v sanitize "$SPLITS" >>"$LOG" 2>&1; echo "racecheck$v rc $?" | tee -a "$LOG"
  done
fi
say summary
grep -E "^== |failures|FAIL|rc [0-9]|ERROR SUMMARY|RACECHECK SUMMARY|^step |^cooperative|^  l2 |^  (llama_|attn|ffn_|o\+|down|lm_head)|^bulk|^mk counters|^layers_mk" "$LOG" | grep -v "^  .* ok$" | tail -120
