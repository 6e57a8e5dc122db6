#!/usr/bin/env bash
# The interposer on the GPU: builds graph_app.cu twice (shared cudart with its PTX stored plain;
# static cudart with nvcc's default zstd-compressed PTX), runs each plain and under
# LD_PRELOAD=libostinato_preload.so (silent, then logging), checks every run prints PASS, and checks
# the log: the graph's 5 nodes and 5 edges, the programmatic edge from `add` to `scale`, each kernel's
# pointers and access, the decision (adoptable for both: the zstd-compressed PTX is decompressed and
# read) and the 5 launches.
# Usage (from the repository root, after scripts/build-devbin.sh): crates/ostinato-preload/tests/gpu/run.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../../../.." && pwd)"
here="$root/crates/ostinato-preload/tests/gpu"
lib="${OSTINATO_PRELOAD_SO:-$root/.devbin/libostinato_preload.so}"
cuda="${CUDA_HOME:-/usr/local/cuda}"
nvcc="${NVCC:-$cuda/bin/nvcc}"
[ -f "$lib" ] || { echo "FAIL: no $lib (run scripts/build-devbin.sh)"; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
gencode="-gencode arch=compute_90,code=[sm_90,compute_90]"
"$nvcc" -O2 $gencode -Xfatbin -compress=false -cudart shared -Xlinker -rpath,"$cuda/lib64" -o "$work/graph_app_plain" "$here/graph_app.cu"
"$nvcc" -O2 $gencode -o "$work/graph_app_zstd" "$here/graph_app.cu"
for app in plain zstd; do
  bin="$work/graph_app_$app"
  plain=$("$bin")
  silent=$(LD_PRELOAD="$lib" "$bin" 2>"$work/$app.stderr")
  logged=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_LOG="$work/$app.jsonl" "$bin")
  echo "$app: plain: $plain | preloaded: $silent | preloaded, logging: $logged"
  for out in "$plain" "$silent" "$logged"; do
    case "$out" in PASS*) ;; *) echo "FAIL: graph_app_$app: $out"; exit 1 ;; esac
  done
  [ ! -s "$work/$app.stderr" ] || { echo "FAIL: the interposer wrote to stderr without OSTINATO_PRELOAD_LOG:"; cat "$work/$app.stderr"; exit 1; }
done
python3 - "$work/plain.jsonl" "$work/zstd.jsonl" <<'PY'
import json, sys

def check(path, adoptable):
    lines = [json.loads(l) for l in open(path)]
    inst = [l for l in lines if l["event"] == "instantiate"]
    dest = [l for l in lines if l["event"] == "exec_destroy"]
    assert len(inst) == 1, f"{path}: {len(inst)} instantiate lines"
    g = inst[0]
    print(f"{path}: {g['api']} -> {g['result']}, {g['counts']}, decision {g['decision']['verdict']}: {g['decision'].get('reason')} (read back in {g['read_us']} us)")
    assert g["result"] == 0, g
    assert g["counts"] == {"nodes": 5, "edges": 5, "kernels": 4, "programmatic_edges": 1}, g["counts"]
    nodes = g["nodes"]
    assert sum(n["type"] == "memset" for n in nodes) == 1, nodes
    name = lambda i: nodes[i].get("name", "")
    pdl = [e for e in g["edges"] if e["programmatic"]]
    assert pdl[0]["from_port"] == 1 and pdl[0]["type"] == 1, pdl
    assert "add" in name(pdl[0]["from"]) and "scale" in name(pdl[0]["to"]), (name(pdl[0]["from"]), name(pdl[0]["to"]))
    for n in nodes:
        if n["type"] != "kernel":
            continue
        pointers = [p for p in n["params"] if p.get("pointers")]
        assert pointers and all(p["pointers"][0]["size"] >= 4 << 16 for p in pointers), n
        if adoptable:
            assert n["code"]["status"] == "analysed", n
            assert pointers[0]["access"] == "write" and all(p["access"] == "read" for p in pointers[1:]), n
    verdict = g["decision"]["verdict"]
    assert verdict == "adoptable", json.dumps(g["decision"], indent=1)
    assert len(dest) == 1 and dest[0]["launches"] == 5, dest

check(sys.argv[1], adoptable=True)
check(sys.argv[2], adoptable=True)
print("PASS: both graphs read back (5 nodes, 5 edges, PDL add -> scale), decided, 5 launches each")
PY
