#!/usr/bin/env bash
# Runs on the GPU machine (builds nothing): every GPU test, CLI checks on the example graphs, and the
# benchmark. Logs go to $OUT (default ./gpu-out). Usage: scripts/gpu-check.sh [quick|full|tests]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}; mkdir -p "$OUT"
WHAT=${1:-full}
BIN=.devbin
export OSTINATO_CACHE_DIR=/tmp/ostinato-nvrtc
export PATH=/usr/local/cuda/bin:$PATH
status=0
step() { echo "== $*"; }
source scripts/vulkan-env.sh
{
  step "machine"; nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv; uname -r
  step "devices"; $BIN/ostinato devices
} 2>&1 | tee "$OUT/machine.log"
if [[ "$WHAT" != bench ]]; then
  step "tests" | tee "$OUT/tests.log"
  for t in $BIN/tests/*; do  # cuda and vulkan test binaries
    echo "--- $(basename "$t")" >>"$OUT/tests.log"
    if ! "$t" --test-threads=1 --nocapture >>"$OUT/tests.log" 2>&1; then echo "FAILED: $t"; status=1; fi
  done
  grep -E "^test result|FAILED|SKIP|panicked|compared" "$OUT/tests.log" | sort | uniq -c | tee "$OUT/tests.summary"
  step "cli" | tee "$OUT/cli.log"
  for f in examples/mix.toml examples/add_one_serial_941.toml examples/own_kernel.toml examples/fused_chain.toml; do
    for mode in graph eager; do for pdl in auto on off; do
      $BIN/ostinato run "$f" --backend cuda --mode $mode --pdl $pdl --replays 3 --check >>"$OUT/cli.log" 2>&1 || { echo "FAILED: run $f $mode $pdl"; status=1; }
    done; done
  done
  # Chain fusion: the user's fusable kernel runs as one fused launch, and unfused gives the same bits.
  for fu in auto on off; do
    $BIN/ostinato run examples/fused_chain.toml --backend cuda --fusion $fu --replays 3 --check >>"$OUT/cli.log" 2>&1 || { echo "FAILED: run fused_chain.toml --fusion $fu"; status=1; }
  done
  grep -q "64 of 64 nodes fused: 1 launches per replay" "$OUT/cli.log" || { echo "FAILED: fused_chain.toml did not fuse"; status=1; }
  # The other two graph builds (same nodes and edges, other driver calls).
  for b in in-order capture; do for pdl in auto on; do
    $BIN/ostinato run examples/mix.toml --backend cuda --pdl $pdl --graph-build $b --replays 3 --check >>"$OUT/cli.log" 2>&1 || { echo "FAILED: run mix.toml --graph-build $b --pdl $pdl"; status=1; }
  done; done
  # The exec's streams at the context's greatest priority, both modes.
  for mode in graph eager; do
    $BIN/ostinato run examples/mix.toml --backend cuda --mode $mode --priority high --replays 3 --check >>"$OUT/cli.log" 2>&1 || { echo "FAILED: run mix.toml --mode $mode --priority high"; status=1; }
  done
  # Replays through the exec's launch thread, both modes.
  for mode in graph eager; do
    $BIN/ostinato run examples/mix.toml --backend cuda --mode $mode --launch thread --replays 3 --check >>"$OUT/cli.log" 2>&1 || { echo "FAILED: run mix.toml --mode $mode --launch thread"; status=1; }
  done
  $BIN/ostinato run examples/add_one_serial_941.toml --backend cuda --launch thread --replays 50 --check >>"$OUT/cli.log" 2>&1 || { echo "FAILED: run add_one_serial_941.toml --launch thread"; status=1; }
  # The Vulkan backend on the GPU's Vulkan driver.
  for f in examples/mix.toml examples/add_one_serial_941.toml; do
    $BIN/ostinato run "$f" --backend vulkan --replays 3 --check >>"$OUT/cli.log" 2>&1 || { echo "FAILED: run $f --backend vulkan"; status=1; }
  done
  # run --dot: the driver's DOT of the instantiated graph (edge types and ports).
  if $BIN/ostinato run examples/mix.toml --backend cuda --replays 1 --check --dot /tmp/mix.dot >>"$OUT/cli.log" 2>&1 \
    && grep -c -- "->" /tmp/mix.dot >>"$OUT/cli.log"; then echo "dot: ok" >>"$OUT/cli.log"; else echo "FAILED: run --dot"; status=1; fi
  tail -n 12 "$OUT/cli.log"
  # The C ABI on CUDA: the C and C++ examples, and an engine's own PTX kernel, memory and stream.
  step "c" | tee "$OUT/c.log"
  C="-I.devbin/c/include -L.devbin/c/lib -Wl,-rpath,$PWD/.devbin/c/lib -lostinato"
  CUDA="-I/usr/local/cuda/include -L/usr/local/cuda/lib64/stubs -lcuda"
  { cc -std=c11 -Wall -Wextra -Werror examples/c/record.c $C -o /tmp/ost-record && /tmp/ost-record cuda \
    && c++ -std=c++17 -Wall -Wextra -Werror examples/c/record.cpp $C -o /tmp/ost-record-cpp && /tmp/ost-record-cpp cuda \
    && cc -std=c11 -Wall -Wextra -Werror examples/c/cuda_own.c $C $CUDA -o /tmp/ost-cuda-own && /tmp/ost-cuda-own; } >>"$OUT/c.log" 2>&1 \
    || { echo "FAILED: the C examples on CUDA"; status=1; }
  cat "$OUT/c.log"
  # The Python package from the wheel built here: its CUDA tests with torch tensors and streams.
  step "python" | tee "$OUT/python.log"
  if ls .devbin/wheels/*.whl >/dev/null 2>&1; then
    { python3 -m pip install -q --no-deps --target /tmp/ost-site .devbin/wheels/*.whl \
      && PYTHONPATH=/tmp/ost-site python3 -m pytest -q -s python/tests; } >>"$OUT/python.log" 2>&1 || { echo "FAILED: python tests"; status=1; }
    # Llama-3.2-1B from Python on transformers' weights: 64 teacher-forced steps, then the timing table.
    PYTHONPATH=/tmp/ost-site python3 examples/python/llama_hf.py --json "$OUT/llama_hf.json" >>"$OUT/python.log" 2>&1 \
      || { echo "FAILED: examples/python/llama_hf.py"; status=1; }
    # PyTorch + Triton MLP blocks: eager, torch.cuda.CUDAGraph and Ostinato, bitwise check and timing table.
    PYTHONPATH=/tmp/ost-site python3 examples/python/triton_mlp.py --json "$OUT/triton_mlp.json" >>"$OUT/python.log" 2>&1 \
      || { echo "FAILED: examples/python/triton_mlp.py"; status=1; }
  else
    echo "no wheel in .devbin/wheels" >>"$OUT/python.log"
  fi
  tail -n 8 "$OUT/python.log"
fi
if [[ "$WHAT" == full || "$WHAT" == bench ]]; then
  step "bench"
  $BIN/ostinato bench --out "$OUT/bench" 2>&1 | tee "$OUT/bench.log" || status=1
fi
exit $status
