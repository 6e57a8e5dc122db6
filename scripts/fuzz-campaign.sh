#!/usr/bin/env bash
# A fuzz campaign over graph files and C call sequences, with the numbers a report needs: inputs that
# ran, were refused with a message, panicked, aborted the process, or gave other bytes on Vulkan than
# on the host. The graph-file fuzzer (crates/ostinato-runtime/tests/fuzz_files.rs) runs in chunks under
# an address-space limit; a chunk whose process dies is recorded as one aborted input (the one its
# progress file names) and the campaign goes on after it. The C fuzzer (examples/c/fuzz_calls.c) runs
# each call sequence in a child process of its own.
#
#   scripts/fuzz-campaign.sh [FILE_INPUTS [C_SEQUENCES [SEED]]]     (defaults: 1000000 10000 1)
set -uo pipefail
cd "$(dirname "$0")/.."
inputs=${1:-1000000}
sequences=${2:-10000}
seed=${3:-1}
chunk=${OSTINATO_FUZZ_CHUNK:-50000}
limit_kb=${OSTINATO_FUZZ_VMEM_KB:-8000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bin=$(cargo test --release -p ostinato-runtime --test fuzz_files --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    try: m = json.loads(l)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "fuzz_files": print(m["executable"])')
[[ -x "$bin" ]] || { echo "could not build the graph-file fuzzer" >&2; exit 1; }

ran=0 refused=0 panicked=0 mismatched=0 aborted=0 vulkan=0
start=0
t0=$(date +%s)
while (( start < inputs )); do
  n=$(( inputs - start < chunk ? inputs - start : chunk ))
  out=$(ulimit -v "$limit_kb"; OSTINATO_FUZZ_SEED=$seed OSTINATO_FUZZ_START=$start OSTINATO_FUZZ_INPUTS=$n \
        OSTINATO_FUZZ_VULKAN_EVERY=${OSTINATO_FUZZ_VULKAN_EVERY:-20} OSTINATO_FUZZ_PROGRESS="$work/progress" \
        "$bin" --nocapture --test-threads=1 2>&1)
  code=$?
  line=$(grep -o 'fuzz: inputs .*' <<<"$out" | tail -n 1)
  if [[ -n "$line" ]]; then
    read -r r v f p m < <(sed -E 's/.*: ([0-9]+) ran or planned \(([0-9]+) of them.*, ([0-9]+) refused with a message, ([0-9]+) panicked, ([0-9]+) mismatched/\1 \2 \3 \4 \5/' <<<"$line")
    ran=$((ran + r)) vulkan=$((vulkan + v)) refused=$((refused + f)) panicked=$((panicked + p)) mismatched=$((mismatched + m))
    (( code == 0 )) || grep -E "panicked|mismatched|gave other bytes" <<<"$out" | head -n 5
    start=$((start + n))
  else
    # The process died (an abort, a signal, a memory limit): the input it was on is one aborted input.
    at=$(cat "$work/progress" 2>/dev/null || echo "$start")
    echo "input $at aborted the process (exit $code):"; tail -n 3 <<<"$out"
    aborted=$((aborted + 1))
    # The inputs before it ran in the dead process without a summary: run them again, then go past it.
    if (( at > start )); then
      n=$((at - start))
      out=$(ulimit -v "$limit_kb"; OSTINATO_FUZZ_SEED=$seed OSTINATO_FUZZ_START=$start OSTINATO_FUZZ_INPUTS=$n \
            OSTINATO_FUZZ_VULKAN_EVERY=${OSTINATO_FUZZ_VULKAN_EVERY:-20} "$bin" --nocapture --test-threads=1 2>&1)
      line=$(grep -o 'fuzz: inputs .*' <<<"$out" | tail -n 1)
      read -r r v f p m < <(sed -E 's/.*: ([0-9]+) ran or planned \(([0-9]+) of them.*, ([0-9]+) refused with a message, ([0-9]+) panicked, ([0-9]+) mismatched/\1 \2 \3 \4 \5/' <<<"$line")
      ran=$((ran + r)) vulkan=$((vulkan + v)) refused=$((refused + f)) panicked=$((panicked + p)) mismatched=$((mismatched + m))
    fi
    start=$((at + 1))
  fi
done
t1=$(date +%s)
echo "graph files: $inputs inputs (seed $seed) in $((t1 - t0)) s under ulimit -v $limit_kb: $ran ran or planned ($vulkan of them also on Vulkan, bitwise equal to the host), $refused refused with a message, $panicked panicked, $aborted aborted, $mismatched mismatched"

# C call sequences: the fuzzer built against the installed library.
prefix="$work/c"
bash scripts/install-c.sh "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
${CC:-cc} -std=c11 -O1 -Wall -Wextra -Werror examples/c/fuzz_calls.c $(pkg-config --cflags --libs ostinato) -o "$work/fuzz_calls"
(ulimit -v "$limit_kb"; "$work/fuzz_calls" "$sequences" "$seed")
status=$?
(( panicked == 0 && aborted == 0 && mismatched == 0 && status == 0 ))
