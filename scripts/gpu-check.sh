#!/usr/bin/env bash
# Runs on the GPU machine (builds nothing; scripts/build-devbin.sh built .devbin/ on the developer
# machine): every GPU test, CLI checks on the example graphs (CUDA and the GPU's Vulkan driver), the C
# and Python checks, the Llama comparisons with transformers, and the benchmark. Logs go to $OUT
# (default ./gpu-out). Usage: scripts/gpu-check.sh [tests|cli|sanitize|python|llama|llama-probe|bench|quick-bench|matrix|side-by-side|full]...
# (several stages may be named; `full` is all of them but quick-bench, matrix, llama-probe and side-by-side). TESTS="gpu_tiles gpu_llama" runs only
# those test binaries in the tests stage; SANITIZE_TOOLS="racecheck" only those tools in the sanitize stage.
# `matrix` runs the matrix against stream capture and the expert's PDL capture in parts, each its own report
# under $OUT/matrix-<part> (a part that runs out of a call's time leaves the others' reports):
# MATRIX_PARTS="a b llama" (default these three: a = grid, fusion, fan, decode, geometry; b = the kernel
# families and the tiles rows; llama = the Llama steps; a in two, a-dispatch and a-geom, for short calls or
# more arms; vk-a and vk-b, Ostinato on Vulkan against raw
# Vulkan on the dispatch and tiles rows and on the kernel families, need .gl carried; vk-b in parts that
# each fit a short call: vk-geom, vk-reduce, vk-memlat-dot, vk-gemv; eight replays a sample, VK_REPLAYS:
# on an H100 vk-a then needs about 200 s and vk-b 300),
# BENCH_ARGS="--tune-edge-types median" adds options (e.g. "--time-limit 280", a part that still writes its report
# inside a call's time); MATRIX_ARMS (default captured,captured-pdl,ostinato)
# sets the CUDA parts' arms, e.g. with the study arm ostinato-edges-median; two parts or more are also reported
# as one (`ostinato bench --merge`: $OUT/matrix, and $OUT/matrix-vk for the vk parts); OUT_PACK=1 leaves $OUT as one archive.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
STAGES=" ${*:-full} "
BIN=.devbin
export OSTINATO_CACHE_DIR=/tmp/ostinato-nvrtc
export PATH=/usr/local/cuda/bin:$PATH
export OSTINATO_NVDISASM=${OSTINATO_NVDISASM:-/usr/local/cuda/bin/nvdisasm}
status=0
step() { echo "== $*"; }
want() { [[ "$STAGES" == *" $1 "* || ( "$STAGES" == *" full "* && "$1" != quick-bench && "$1" != matrix && "$1" != launch-floor && "$1" != llama-probe && "$1" != side-by-side ) ]]; }
fail() { echo "FAILED: $*"; status=1; }
source scripts/vulkan-env.sh
# scripts/build-devbin.sh packs the test binaries.
if [[ -f $BIN/tests.tar.xz ]]; then rm -rf $BIN/tests && tar -xJf $BIN/tests.tar.xz -C $BIN; fi
{
  step "machine"; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv; uname -r
  step "devices"; $BIN/ostinato devices
} 2>&1 | tee "$OUT/machine.log"

if want tests; then
  step "tests" | tee "$OUT/tests.log"
  for t in $BIN/tests/*; do  # the CUDA, Vulkan and Llama-pack test binaries (TESTS="a b": only those)
    if [[ -n ${TESTS:-} && " $TESTS " != *" $(basename "$t" | sed 's/__.*//') "* ]]; then continue; fi
    echo "--- $(basename "$t")" >>"$OUT/tests.log"
    start=$(date +%s)
    if ! timeout 240 "$t" --test-threads=1 --nocapture >>"$OUT/tests.log" 2>&1; then fail "$t"; fi
    echo "--- $(basename "$t") took $(( $(date +%s) - start )) s" >>"$OUT/tests.log"
  done
  grep -E "^test result|FAILED|SKIP|panicked|took" "$OUT/tests.log" | sort | uniq -c | tee "$OUT/tests.summary"
fi

if want cli; then
  step "cli" | tee "$OUT/cli.log"
  for f in examples/mix.toml examples/add_one_serial_941.toml examples/own_kernel.toml examples/fused_chain.toml; do
    for mode in graph eager; do for pdl in auto on off; do
      $BIN/ostinato run "$f" --backend cuda --mode $mode --pdl $pdl --replays 3 --check >>"$OUT/cli.log" 2>&1 || fail "run $f $mode $pdl"
    done; done
  done
  for fu in auto on off; do
    $BIN/ostinato run examples/fused_chain.toml --backend cuda --fusion $fu --replays 3 --check >>"$OUT/cli.log" 2>&1 || fail "run fused_chain.toml --fusion $fu"
  done
  grep -q "64 of 64 nodes fused: 1 launches per replay" "$OUT/cli.log" || fail "fused_chain.toml did not fuse"
  # Ten independent launches of 64 blocks: one kernel side by side under auto.
  $BIN/ostinato run examples/side_by_side.toml --backend cuda --replays 3 --check >>"$OUT/cli.log" 2>&1 || fail "run side_by_side.toml"
  grep -q "10 of 10 nodes fused: 1 launches per replay" "$OUT/cli.log" || fail "side_by_side.toml did not run side by side"
  # Sixteen independent launches of a user's kernel with block barriers: two kernels side by side.
  $BIN/ostinato run examples/side_by_side_barrier.toml --backend cuda --replays 3 --check >>"$OUT/cli.log" 2>&1 || fail "run side_by_side_barrier.toml"
  grep -q "16 of 16 nodes fused: 2 launches per replay" "$OUT/cli.log" || fail "side_by_side_barrier.toml did not run side by side"
  for b in in-order capture; do for pdl in auto on; do
    $BIN/ostinato run examples/mix.toml --backend cuda --pdl $pdl --graph-build $b --replays 3 --check >>"$OUT/cli.log" 2>&1 || fail "run mix.toml --graph-build $b --pdl $pdl"
  done; done
  for mode in graph eager; do
    $BIN/ostinato run examples/mix.toml --backend cuda --mode $mode --launch thread --replays 3 --check >>"$OUT/cli.log" 2>&1 || fail "run mix.toml --mode $mode --launch thread"
  done
  # The kernel contract: modes inferred from the code, the manifests of the user's and built-in kernels.
  $BIN/ostinato plan examples/own_kernel.toml --cuda --explain >>"$OUT/cli.log" 2>&1 || fail "plan own_kernel.toml --cuda --explain"
  $BIN/ostinato kernels examples/own_kernel.toml --backend cuda >>"$OUT/cli.log" 2>&1 || fail "kernels own_kernel.toml"
  # The Vulkan backend on the GPU's Vulkan driver, fused and not.
  for f in examples/mix.toml examples/add_one_serial_941.toml; do for fu in auto off; do
    $BIN/ostinato run "$f" --backend vulkan --fusion $fu --replays 3 --check >>"$OUT/cli.log" 2>&1 || fail "run $f --backend vulkan --fusion $fu"
  done; done
  # Traces: the run's own replays traced (CUPTI on CUDA, timestamps on Vulkan), checked and drawn.
  for args in "--backend cuda" "--backend cuda --mode eager" "--backend cuda --launch thread" "--backend vulkan"; do
    name=$(tr ' ' '_' <<<"${args#--backend }")
    $BIN/ostinato run examples/mix.toml $args --replays 3 --check --trace "$OUT/trace-mix-$name.json" --trace-svg "$OUT/trace-mix-$name.svg" >>"$OUT/cli.log" 2>&1 \
      || fail "run mix.toml $args --trace"
  done
  $BIN/ostinato run examples/fused_chain.toml --backend cuda --replays 2 --check --trace "$OUT/trace-fused_chain.json" >>"$OUT/cli.log" 2>&1 || fail "run fused_chain.toml --trace"
  if $BIN/ostinato run examples/mix.toml --backend cuda --replays 1 --check --dot /tmp/mix.dot >>"$OUT/cli.log" 2>&1 \
    && grep -c -- "->" /tmp/mix.dot >>"$OUT/cli.log"; then echo "dot: ok" >>"$OUT/cli.log"; else fail "run --dot"; fi
  tail -n 12 "$OUT/cli.log"
  step "c" | tee "$OUT/c.log"
  C="-I.devbin/c/include -L.devbin/c/lib -Wl,-rpath,$PWD/.devbin/c/lib -lostinato"
  CUDA="-I/usr/local/cuda/include -L/usr/local/cuda/lib64/stubs -lcuda"
  { cc -std=c11 -Wall -Wextra -Werror examples/c/record.c $C -o /tmp/ost-record && /tmp/ost-record cuda && /tmp/ost-record vulkan \
    && c++ -std=c++17 -Wall -Wextra -Werror examples/c/record.cpp $C -o /tmp/ost-record-cpp && /tmp/ost-record-cpp cuda \
    && cc -std=c11 -Wall -Wextra -Werror examples/c/vulkan_free.c $C -o /tmp/ost-vulkan-free && /tmp/ost-vulkan-free \
    && cc -std=c11 -Wall -Wextra -Werror examples/c/cuda_own.c $C $CUDA -o /tmp/ost-cuda-own && /tmp/ost-cuda-own; } >>"$OUT/c.log" 2>&1 \
    || fail "the C examples on CUDA and Vulkan"
  cat "$OUT/c.log"
fi

if want python; then
  step "python" | tee "$OUT/python.log"
  if ls .devbin/wheels/*.whl >/dev/null 2>&1; then
    { python3 -m pip install -q --no-deps --target /tmp/ost-site .devbin/wheels/*.whl \
      && PYTHONPATH=/tmp/ost-site python3 -m pytest -q -rs -s python/tests; } >>"$OUT/python.log" 2>&1 || fail "python tests"
    # PyTorch + Triton MLP blocks: eager, torch.cuda.CUDAGraph and Ostinato, bitwise check and timing table.
    PYTHONPATH=/tmp/ost-site python3 examples/python/triton_mlp.py --json "$OUT/triton_mlp.json" >>"$OUT/python.log" 2>&1 \
      || fail "examples/python/triton_mlp.py"
  else
    echo "no wheel in .devbin/wheels" >>"$OUT/python.log"
  fi
  tail -n 12 "$OUT/python.log"
fi

if want llama; then
  # Llama-3.2-1B against transformers: 1,024 teacher-forced positions with f32 RoPE frequencies in the
  # reference, from Python and from a checkpoint transformers wrote (`save_pretrained`); Llama-3.2-3B's
  # shape from a checkpoint too.
  step "llama" | tee "$OUT/llama.log"
  python3 -m pip install -q --no-deps --target /tmp/ost-site .devbin/wheels/*.whl >>"$OUT/llama.log" 2>&1
  PYTHONPATH=/tmp/ost-site python3 examples/python/llama_hf.py --steps 1024 --skip-compiled --json "$OUT/llama_hf.json" >>"$OUT/llama.log" 2>&1 \
    || fail "examples/python/llama_hf.py"
  { python3 examples/python/llama_hf_reference.py /tmp/hf --positions 1024 \
    && OSTINATO_HF_DIR=/tmp/hf .devbin/tests/gpu_llama__test a_transformers_checkpoint --test-threads=1 --nocapture; } >>"$OUT/llama.log" 2>&1 \
    || fail "the transformers checkpoint"
  { python3 examples/python/llama_hf_reference.py /tmp/hf3 --positions 1024 --shape 3b \
    && OSTINATO_HF_DIR=/tmp/hf3 .devbin/tests/gpu_llama__test a_transformers_checkpoint --test-threads=1 --nocapture; } >>"$OUT/llama.log" 2>&1 \
    || fail "the transformers checkpoint (3B shape)"
  tail -n 16 "$OUT/llama.log"
fi

if want llama-probe; then
  # The decode probe's per-kernel check against double precision, kernels alone and back to back, the
  # step per variant, and compute-sanitizer (lab/probes/llama-step.sh; COMBOS, VARIANTS, SPLITS pass on).
  step "llama-probe" | tee "$OUT/llama-probe.log"
  OUT="$OUT/llama-probe" timeout 400 bash lab/probes/llama-step.sh "$BIN/llama" >>"$OUT/llama-probe.log" 2>&1 || fail "llama-probe"
  tail -n 60 "$OUT/llama-probe.log"
fi

if want sanitize; then
  # compute-sanitizer with its default flags, as users run it: memcheck, racecheck, synccheck and
  # initcheck on every CUDA example (fused chains, tile-fused chains and tile hand-offs among them) and
  # on the Llama step at shrunk dims; a run passes when the tool reports 0 errors and the run's --check
  # passes. The four tools run side by side (one process each at a time).
  step "sanitize" | tee "$OUT/sanitize.log"
  # memcheck, synccheck and initcheck end with "ERROR SUMMARY: 0 errors"; racecheck with "RACECHECK
  # SUMMARY: 0 hazards displayed (0 errors, 0 warnings)".
  clean() { grep -qE "ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards displayed \(0 errors, 0 warnings\)" "$1"; }
  sanitize_tool() {
    local tool=$1 log=/tmp/san-$1.log out=/tmp/san-$1.txt
    : >"$out"
    while IFS= read -r args; do
      if compute-sanitizer --tool "$tool" $BIN/ostinato run $args --backend cuda --replays 2 --check >"$log" 2>&1 \
         && clean "$log"; then echo "ok   $tool $args" >>"$out"
      else echo "FAIL $tool $args" >>"$out"; tail -n 30 "$log" >>"$out"; fi
    done <<'LIST'
examples/mix.toml
examples/add_one_serial_941.toml
examples/own_kernel.toml
examples/fused_chain.toml
examples/tiled_chain.toml
examples/side_by_side.toml
examples/side_by_side_barrier.toml
examples/tile_sparse.toml --handoff on
examples/tile_sparse.toml --fusion off --handoff on --mode eager
LIST
    # The spread/gather chain of a user's kernels fused by components (and handed off, fusion off).
    if compute-sanitizer --tool "$tool" $BIN/tests/gpu_tiles__test a_tile_sparse_chain --test-threads=1 >"$log" 2>&1 \
       && clean "$log"; then echo "ok   $tool gpu_tiles sparse chain (components, hand-offs)" >>"$out"
    else echo "FAIL $tool gpu_tiles sparse chain (components, hand-offs)" >>"$out"; tail -n 30 "$log" >>"$out"; fi
    if compute-sanitizer --tool "$tool" $BIN/tests/gpu_llama__test shrunk_step_on_cuda_agrees_with_the_reference --test-threads=1 >"$log" 2>&1 \
       && clean "$log"; then echo "ok   $tool llama step (shrunk dims)" >>"$out"
    else echo "FAIL $tool llama step (shrunk dims)" >>"$out"; tail -n 30 "$log" >>"$out"; fi
    if compute-sanitizer --tool "$tool" $BIN/tests/gpu_llama__test shrunk_3b_head_shape --test-threads=1 >"$log" 2>&1 \
       && clean "$log"; then echo "ok   $tool llama step (3B head shape, shrunk)" >>"$out"
    else echo "FAIL $tool llama step (3B head shape, shrunk)" >>"$out"; tail -n 30 "$log" >>"$out"; fi
    # The streaming projections on one and two blocks: the ring of stages wraps and tiles go by ticket
    # (at the shrunk dims on 132 blocks neither happens).
    if compute-sanitizer --tool "$tool" $BIN/tests/gpu_llama__test shrunk_step_on_few_streaming_blocks --test-threads=1 >"$log" 2>&1 \
       && clean "$log"; then echo "ok   $tool llama step (shrunk, 1 and 2 streaming blocks)" >>"$out"
    else echo "FAIL $tool llama step (shrunk, 1 and 2 streaming blocks)" >>"$out"; tail -n 30 "$log" >>"$out"; fi
  }
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck initcheck}; do sanitize_tool $tool & done
  wait
  cat /tmp/san-*.txt >>"$OUT/sanitize.log"
  grep -c "^ok" "$OUT/sanitize.log"
  if grep "^FAIL" "$OUT/sanitize.log"; then fail "compute-sanitizer"; fi
fi

if want bench; then
  step "bench"
  $BIN/ostinato bench --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log" || status=1
fi
if want matrix; then
  declare -A part_filter=([a]="grid/,fusion/,fan/,decode/,geom/" [b]="reduce,memlat/,dot/,gemv/,tiles/" [llama]="llama/"
    [a-dispatch]="grid/,fusion/,fan/,decode/" [a-geom]="geom/"
    [vk-a]="grid/,fusion/,fan/,tiles/" [vk-b]="geom/,reduce,memlat/,dot/,gemv/"
    [vk-geom]="geom/" [vk-reduce]="reduce" [vk-memlat-dot]="memlat/,dot/" [vk-gemv]="gemv/")
  for part in ${MATRIX_PARTS:-a b llama}; do
    [[ -n ${part_filter[$part]:-} ]] || { fail "matrix part $part (a, a-dispatch, a-geom, b, llama, vk-a, vk-b, vk-geom, vk-reduce, vk-memlat-dot or vk-gemv)"; continue; }
    # The vk parts: Ostinato on Vulkan against a raw Vulkan command buffer (the Vulkan loader carried in .gl).
    arms=${MATRIX_ARMS:-captured,captured-pdl,ostinato}
    # The vk parts time eight replays a sample (VK_REPLAYS): a Vulkan arm's time is the sum of its
    # submissions' command-buffer timestamps, which leave out each submission's start, while a CUDA
    # event pair around one launch from an idle stream holds that start (6-17 us a sample; docs/fences.md,
    # "Where Ostinato still loses"). Back to back, the CUDA arm's starts overlap the replay before.
    replays=()
    [[ $part == vk-* ]] && arms=ostinato,vulkan,ostinato-vulkan && replays=(--replays "${VK_REPLAYS:-8}")
    step "matrix $part"
    start=$(date +%s)
    # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
    $BIN/ostinato bench --filter "${part_filter[$part]}" --arms $arms "${replays[@]}" ${BENCH_ARGS:-} \
      --out "$OUT/matrix-$part" 2>&1 | tee "$OUT/matrix-$part.log" || status=1
    echo "matrix $part took $(( $(date +%s) - start )) s" | tee -a "$OUT/matrix-$part.log"
  done
  # Two parts or more: one report of the CUDA parts ($OUT/matrix) and one of the Vulkan parts
  # ($OUT/matrix-vk), every row ranked together (`ostinato bench --merge`).
  for kind in cuda vk; do
    runs=()
    for part in ${MATRIX_PARTS:-a b llama}; do
      [[ $kind == vk && $part != vk-* || $kind == cuda && $part == vk-* ]] && continue
      [[ -f $OUT/matrix-$part/results.json ]] && runs+=("$OUT/matrix-$part")
    done
    merged=$OUT/matrix; [[ $kind == vk ]] && merged=$OUT/matrix-vk
    if (( ${#runs[@]} > 1 )); then
      step "matrix merged: ${runs[*]}"
      $BIN/ostinato bench --merge "$(IFS=,; echo "${runs[*]}")" --out "$merged" 2>&1 | tee "$merged.log" || fail "merging ${runs[*]}"
    fi
  done
fi
if want side-by-side; then
  # Ten independent kernels in one launch (fusion `on`) against the graph shapes: the probe
  # (lab/probes/side_by_side.cu, built here with the machine's nvcc), then the matrix's independent rows
  # with the exec fused `on` beside the baselines and raw Vulkan (.gl carried).
  step "side-by-side" | tee "$OUT/side-by-side.log"
  { nvcc -O3 -arch=sm_90 -o /tmp/side_by_side lab/probes/side_by_side.cu -lcuda && /tmp/side_by_side --timing all; } >>"$OUT/side-by-side.log" 2>&1 \
    || fail "lab/probes/side_by_side.cu"
  # shellcheck disable=SC2086  # BENCH_ARGS is a list of options
  $BIN/ostinato bench --filter /indep/ --arms captured,captured-pdl,ostinato,ostinato-fusion-on,vulkan ${BENCH_ARGS:-} \
    --out "$OUT/side-by-side" 2>&1 | tee -a "$OUT/side-by-side.log" || status=1
fi
if want launch-floor; then
  # The one-dispatch rows at the launch floor, where Ostinato's graph of one kernel node has measured
  # 1-3% behind the same kernel stream-captured: five instances of each arm, Ostinato's graph built
  # node by node (bulk) and by stream capture, PDL off beside auto, and every arm's graph as the
  # driver holds it (DOT) to compare the two kernel nodes.
  for build in bulk capture; do
    step "launch floor, Ostinato's graph built by $build"
    $BIN/ostinato bench --filter grid/serial/n1/b1,grid/indep/n1/b1 --arms captured,captured-pdl,ostinato,ostinato-pdl-off \
      --instances 5 --graph-build $build --dot "$OUT/launch-floor-$build-dot" --out "$OUT/launch-floor-$build" 2>&1 \
      | tee "$OUT/launch-floor-$build.log" || status=1
  done
fi
if want quick-bench; then
  step "quick bench"
  $BIN/ostinato bench --quick --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log" || status=1
fi
# OUT_PACK=1: everything under $OUT in one archive, $OUT/gpu-check.tar.gz (the device tool returns at most
# eight files from a call); the charts' SVGs and the results' JSON stay in it too.
if [[ ${OUT_PACK:-0} == 1 ]]; then
  tar -C "$OUT" -czf /tmp/gpu-check.tar.gz . && find "$OUT" -mindepth 1 -delete && mv /tmp/gpu-check.tar.gz "$OUT/" \
    || fail "packing $OUT"
fi
exit $status
