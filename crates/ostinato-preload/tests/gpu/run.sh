#!/usr/bin/env bash
# The interposer on the GPU: builds graph_app.cu twice (shared cudart with its PTX stored plain;
# static cudart with nvcc's default zstd-compressed PTX), runs each plain and under
# LD_PRELOAD=libostinato_preload.so (adopting silently; observing only, with a log; adopting, with a
# log; adopting only the needed edges, with a log), checks every run prints PASS (its results checked
# on the host), and checks the logs: the graph's 5 nodes and 5 edges, the programmatic edge from `add`
# to `scale`, each kernel's pointers and access, the decision (adoptable for both: the
# zstd-compressed PTX is decompressed and read), the adoption (by default nothing to gain: the
# captured edges kept, no fence to change; with the needed edges, the memset no longer ordered before
# the fills, which touch other buffers, but before the add; the fills' edges into the add kept;
# add -> scale programmatic as captured) and the 5 launches, all of the adopted graph. Then
# `graph_app time` prints the graph adopted (the needed edges) and not, timed side by side; and
# `graph_app update` stays adopted across two updates in place; `graph_app setparams` across three node
# param changes; `graph_app memnode` (a graph with
# memory nodes) runs unchanged, logged as falling through.
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
  observed=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_ADOPT=0 OSTINATO_PRELOAD_LOG="$work/$app.observed.jsonl" "$bin")
  default=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_LOG="$work/$app.default.jsonl" "$bin")
  logged=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_EDGES=needed OSTINATO_PRELOAD_LOG="$work/$app.jsonl" "$bin")
  echo "$app: plain: $plain | adopting: $silent | observing, logging: $observed | adopting, logging: $default | adopting the needed edges, logging: $logged"
  for out in "$plain" "$silent" "$observed" "$default" "$logged"; do
    case "$out" in PASS*) ;; *) echo "FAIL: graph_app_$app: $out"; exit 1 ;; esac
  done
  [ ! -s "$work/$app.stderr" ] || { echo "FAIL: the interposer wrote to stderr without OSTINATO_PRELOAD_LOG:"; cat "$work/$app.stderr"; exit 1; }
done
python3 - "$work/plain.jsonl" "$work/zstd.jsonl" "$work/plain.observed.jsonl" "$work/plain.default.jsonl" <<'PY'
import json, sys

def check(path, adoptable, adopted=True, default=False):
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
    a = g["adoption"]
    print(f"  adoption: {a['status']} {a.get('why', '')}: edges {[(e['from'], e['to'], e['programmatic']) for e in a.get('edges', [])]}, dropped {a.get('dropped', [])}, {a['adopt_us']} us")
    if not adopted:
        assert a["status"] == "off" and dest[0]["adopted_launches"] == 0, (a, dest)
        return
    if default:
        # The captured edges kept: no fence to change here (the add waits for nothing, the scale's
        # edge is programmatic already), so the application's own graph runs.
        assert a["status"] == "not_adopted" and "nothing to gain" in a["why"] and dest[0]["adopted_launches"] == 0, (a, dest)
        return
    assert a["status"] == "adopted", a
    memset = next(i for i, n in enumerate(nodes) if n["type"] == "memset")
    kind = lambda i: "memset" if i == memset else next(k for k in ("fill", "add", "scale") if k in name(i))
    got = sorted((kind(e["from"]), kind(e["to"]), e["programmatic"]) for e in a["edges"])
    want = sorted([("memset", "add", False), ("fill", "add", False), ("fill", "add", False), ("add", "scale", True)])
    assert got == want, (got, want)
    assert sorted((kind(d["from"]), kind(d["to"])) for d in a["dropped"]) == [("memset", "fill")] * 2, a["dropped"]
    assert dest[0]["adopted_launches"] == 5, dest

check(sys.argv[1], adoptable=True)
check(sys.argv[2], adoptable=True)
check(sys.argv[3], adoptable=True, adopted=False)
check(sys.argv[4], adoptable=True, default=True)
print("PASS: both graphs read back (5 nodes, 5 edges, PDL add -> scale), decided, adopted, 5 launches each of the adopted graph")
PY
for app in plain zstd; do
  out=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_EDGES=needed OSTINATO_PRELOAD_LOG="$work/$app.time.jsonl" "$work/graph_app_$app" time)
  echo "$app, time (the needed edges): $out"
  case "$out" in *PASS*) ;; *) echo "FAIL: graph_app_$app time: $out"; exit 1 ;; esac
done
# An update in place: the executable graph updated twice from graphs of its topology (another scale)
# stays adopted, its adopted graph made again at each update (no revocation), every launch checked.
for app in plain zstd; do
  out=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_EDGES=needed OSTINATO_PRELOAD_LOG="$work/$app.update.jsonl" "$work/graph_app_$app" update)
  echo "$app, update: $out"
  case "$out" in *"PASS (updated twice"*) ;; *) echo "FAIL: graph_app_$app update: $out"; exit 1 ;; esac
  python3 - "$work/$app.update.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
inst = [l for l in lines if l["event"] == "instantiate"]
upd = [l for l in lines if l["event"] == "exec_update"]
rev = [l for l in lines if l["event"] == "adoption_revoked"]
dest = [l for l in lines if l["event"] == "exec_destroy"]
assert len(inst) == 2 and all(g["adoption"]["status"] == "adopted" for g in inst), [g["adoption"] for g in inst]
assert len(upd) == 2 and all(u["adoption"]["status"] == "adopted" and u["exec"] == inst[1]["exec"] for u in upd), upd
assert not rev, rev
last = [d for d in dest if d["exec"] == inst[1]["exec"]]
assert len(last) == 1 and last[0]["launches"] == 5 and last[0]["adopted_launches"] == 5, last
print(f"  update: adopted again at both updates ({[u['adoption']['adopt_us'] for u in upd]} us), 5 of 5 launches adopted")
PY
done
# Node params changed in place: the scale's factor and its output (the adopted edges stay: the adopted
# executable graph takes each change in place), then the add's second input (b no longer read: the
# needed edges change, the adopted graph is made again from its replica); no revocation, every launch
# adopted and checked.
for app in plain zstd; do
  out=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_EDGES=needed OSTINATO_PRELOAD_LOG="$work/$app.setparams.jsonl" "$work/graph_app_$app" setparams)
  echo "$app, setparams: $out"
  case "$out" in *"PASS (params changed 3 times"*) ;; *) echo "FAIL: graph_app_$app setparams: $out"; exit 1 ;; esac
  python3 - "$work/$app.setparams.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
inst = [l for l in lines if l["event"] == "instantiate"]
patched = [l for l in lines if l["event"] == "node_params_patched"]
upd = [l for l in lines if l["event"] == "exec_update"]
rev = [l for l in lines if l["event"] == "adoption_revoked"]
dest = [l for l in lines if l["event"] == "exec_destroy"]
assert len(inst) == 2 and all(g["adoption"]["status"] == "adopted" for g in inst), [g["adoption"] for g in inst]
ex = inst[1]["exec"]
assert len(patched) == 2 and all(p["exec"] == ex for p in patched), patched
assert len(upd) == 1 and upd[0]["exec"] == ex and upd[0]["adoption"]["status"] == "adopted" and upd[0]["api"].startswith("cuGraphExecKernelNodeSetParams"), upd
assert not rev, rev
last = [d for d in dest if d["exec"] == ex]
assert len(last) == 1 and last[0]["launches"] == 5 and last[0]["adopted_launches"] == 5, last
print(f"  setparams: 2 changes in place (read back in {[p['read_us'] for p in patched]} us), 1 made again "
      f"({upd[0]['adoption']['adopt_us']} us, edges {upd[0]['adoption']['edges']}), 5 of 5 launches adopted")
PY
done
# Fall-through: a graph with memory nodes (alloc and free) runs unchanged under the interposer, and the
# log says why it was not adopted.
for app in plain zstd; do
  out=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_LOG="$work/$app.memnode.jsonl" "$work/graph_app_$app" memnode)
  echo "$app, memnode: $out"
  case "$out" in PASS*) ;; *) echo "FAIL: graph_app_$app memnode: $out"; exit 1 ;; esac
  python3 - "$work/$app.memnode.jsonl" <<'PY'
import json, sys
inst = [l for l in map(json.loads, open(sys.argv[1])) if l["event"] == "instantiate"]
assert len(inst) == 1, inst
g = inst[0]
types = sorted(n["name"] if n["type"] == "other" else n["type"] for n in g["nodes"])
assert types == ["kernel", "kernel", "mem_alloc", "mem_free"], g["nodes"]
d, a = g["decision"], g["adoption"]
assert d["verdict"] == "fall_through" and "mem_alloc" in json.dumps(d["reasons"]), d
assert a["status"] == "not_adopted", a
print(f"  memnode: {types}, {d['verdict']}: {d['reason']}; adoption {a['status']}")
PY
done
