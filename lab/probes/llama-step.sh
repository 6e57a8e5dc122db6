#!/usr/bin/env bash
# The Llama decode study in one GPU-machine call, from a folder D holding what was built on the developer
# machine (the GPU machine has no Rust toolchain):
#   D/bin/llama_kernels*   lab/probes/llama_kernels.cu built with nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels
#                          -DOST_TRIGGER=3 (variants: other -D values; _old: the previous kernels)
#   D/ostinato             the CLI (cargo build --release -p ostinato-cli)
#   D/gpu_llama            cargo test --release -p ostinato-llama --test gpu_llama --no-run
#   D/wheels/*.whl         maturin build --release --manifest-path python/Cargo.toml
#   D/py/*.py              examples/python/llama_hf.py, llama_hf_reference.py
# Stages (a failed kernel check stops the run): check + compute-sanitizer, step and kernel timings of
# every variant, the GPU test (f32 reference, transformers checkpoint), the bench's llama rows, Python
# against transformers. Everything goes to $OUT/run.log; a summary is printed last.
#   bash llama-step.sh D [stages: check,racecheck,time,shrunk,test,bench,python]
set -u
D=$(cd "${1:?folder}" && pwd)
STAGES=${2:-check,time,test,bench,python}
OUT=${OUT:-/tmp/llama-out}
mkdir -p "$OUT"
LOG=$OUT/run.log
has() { [[ ",$STAGES," == *",$1,"* ]]; }
say() { echo "== $*" | tee -a "$LOG"; }
cd "$D"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader >>"$LOG" 2>&1
if has check; then
  say check
  timeout 150 bin/llama_kernels check 8,16,32 264 >>"$LOG" 2>&1 || { say "CHECK FAILED"; grep -E "FAIL|error" "$LOG" | head -20; exit 1; }
  say memcheck
  timeout 120 compute-sanitizer --tool memcheck --leak-check no bin/llama_kernels sanitize 16,3 264 >>"$LOG" 2>&1; echo "memcheck rc $?" | tee -a "$LOG"
fi
if has racecheck; then
  say racecheck
  timeout 90 compute-sanitizer --tool racecheck bin/llama_kernels sanitize 16 100 >>"$LOG" 2>&1; echo "racecheck rc $?" | tee -a "$LOG"
fi
if has time; then
  for v in "" _static _six _tile8 _lb3; do
    [[ -x bin/llama_kernels$v ]] || continue
    say "step$v"
    timeout 60 bin/llama_kernels$v step 8,16,32 264 >>"$LOG" 2>&1
  done
  say kernels
  timeout 60 bin/llama_kernels kernels 32 264 >>"$LOG" 2>&1
  for p in 1024; do
    say "old kernels pos $p"
    timeout 60 bin/llama_kernels_old $p 264 >>"$LOG" 2>&1
  done
fi
if has shrunk; then
  say "gpu_llama shrunk"
  timeout 120 ./gpu_llama shrunk --nocapture >>"$LOG" 2>&1; echo "gpu_llama shrunk rc $?" | tee -a "$LOG"
fi
if has test; then
  say "gpu_llama + transformers checkpoint"
  export PYTHONUNBUFFERED=1
  timeout 240 python3 py/llama_hf_reference.py /tmp/hf --positions 1024 >>"$LOG" 2>&1; echo "reference rc $?" | tee -a "$LOG"
  OSTINATO_HF_DIR=/tmp/hf timeout 300 ./gpu_llama --nocapture --test-threads 1 >>"$LOG" 2>&1; echo "gpu_llama rc $?" | tee -a "$LOG"
fi
if has bench; then
  say "bench llama"
  timeout 300 ./ostinato bench --filter llama --out /tmp/bench >>"$LOG" 2>&1; echo "bench rc $?" | tee -a "$LOG"
  cp /tmp/bench/REPORT.md "$OUT/bench-REPORT.md" 2>/dev/null
  cp /tmp/bench/results.json "$OUT/bench-results.json" 2>/dev/null
fi
if has python; then
  say "python vs transformers"
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site wheels/*.whl >>"$LOG" 2>&1
  PYTHONPATH=/tmp/site timeout 240 python3 py/llama_hf.py --steps 1024 --skip-compiled --json "$OUT/hf.json" >>"$LOG" 2>&1; echo "llama_hf rc $?" | tee -a "$LOG"
fi
say summary
grep -E "^== |failures|rc [0-9]|ERROR SUMMARY|step pos|^  llama_|^llama_|^  attn\+o|step graph|Δlogit|teacher-forced|inv_freq|test result|panicked|regs" "$LOG" | tail -150
