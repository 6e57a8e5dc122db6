#!/usr/bin/env bash
# The interposer end to end without a GPU: a table driver (fake_cuda.c) reached as cudart reaches
# libcuda (dlopen, dlsym, cuGetProcAddress), an application run plain and under LD_PRELOAD, the log
# checked; then a program linked to the table driver, calling it by name as one built with -lcuda
# does (and once through dlsym on its handle), checked the same way. Usage: run.sh [path/to/libostinato_preload.so] (default: the workspace's debug build).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
lib="$(realpath "${1:-$here/../../../../target/debug/libostinato_preload.so}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cc=${CC:-cc}
$cc -shared -fPIC -O1 -o "$work/libfake.so" "$here/fake_cuda.c"
$cc -shared -fPIC -DFIRST -o "$work/libfirst.so" "$here/next.c"
$cc -shared -fPIC -o "$work/libsecond.so" "$here/next.c"
$cc -o "$work/app" "$here/app.c" -L"$work" -Wl,--no-as-needed -lfirst -lsecond -ldl -Wl,-rpath,"$work"
$cc -o "$work/app_linked" "$here/app_linked.c" -L"$work" -lfake -ldl -Wl,-rpath,"$work"
$cc -shared -fPIC -o "$work/libuser.so" "$here/user_local.c" -L"$work" -lfake -Wl,-rpath,"$work"
$cc -o "$work/app_local" "$here/app_local.c" -ldl
fatbin="$here/../fixtures/scale_plain.fatbin"
plain=$("$work/app" "$work/libfake.so" "$fatbin")
silent=$(LD_PRELOAD="$lib" "$work/app" "$work/libfake.so" "$fatbin" 2>&1)
logged=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_LOG="$work/log.jsonl" "$work/app" "$work/libfake.so" "$fatbin")
echo "plain: $plain; preloaded, silent: $silent; preloaded, logging: $logged"
[ "$plain" = PASS ] && [ "$silent" = PASS ] && [ "$logged" = PASS ] || { echo "FAIL: an application run failed"; exit 1; }
python3 - "$work/log.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
inst = [l for l in lines if l["event"] == "instantiate"]
dest = [l for l in lines if l["event"] == "exec_destroy"]
assert len(inst) == 1 and len(dest) == 1, lines
g = inst[0]
assert g["api"] == "cuGraphInstantiateWithFlags" and g["result"] == 0 and g["exec"] == "0x9001", g
assert g["counts"] == {"nodes": 2, "edges": 1, "kernels": 1, "programmatic_edges": 1}, g["counts"]
k = g["nodes"][1]
assert k["type"] == "kernel" and k["name"] == "scale" and k["grid"] == [2, 1, 1], k
assert [p.get("access") for p in k["params"]] == ["write", "read", None, None], k["params"]
assert k["params"][1]["pointers"][0] == {"at": 0, "value": "0x7f0000100040", "base": "0x7f0000100000", "size": 4096}, k["params"][1]
assert g["decision"]["verdict"] == "adoptable", g["decision"]
assert dest[0]["launches"] == 3 and dest[0]["adoptable"] is True, dest
# The one edge is needed and already programmatic: the adopted graph would be the captured one.
a = g["adoption"]
assert a["status"] == "not_adopted" and "nothing to gain" in a["why"], a
assert [(e["from"], e["to"], e["programmatic"], e["captured"]) for e in a["edges"]] == [(0, 1, True, True)], a
assert dest[0]["adopted_launches"] == 0, dest
print("PASS: the log has the graph (2 nodes, 1 programmatic edge), the kernel's pointers and access, the decision, the adoption (nothing to gain), 3 launches")
PY
[ -z "$(LD_PRELOAD="$lib" "$work/app" "$work/libfake.so" "$fatbin" 2>&1 >/dev/null)" ] || { echo "FAIL: not silent without OSTINATO_PRELOAD_LOG"; exit 1; }
linked_plain=$("$work/app_linked" "$work/libfake.so" "$fatbin")
linked=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_LOG="$work/linked.jsonl" "$work/app_linked" "$work/libfake.so" "$fatbin")
echo "linked to the driver: plain: $linked_plain; preloaded, logging: $linked"
[ "$linked_plain" = PASS ] && [ "$linked" = PASS ] || { echo "FAIL: the linked program failed"; exit 1; }
python3 - "$work/linked.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
inst = [l for l in lines if l["event"] == "instantiate"]
dest = [l for l in lines if l["event"] == "exec_destroy"]
assert len(inst) == 1 and len(dest) == 1, lines
g = inst[0]
assert g["api"] == "cuGraphInstantiateWithFlags" and g["exec"] == "0x9001", g
k = g["nodes"][1]
assert [p.get("access") for p in k["params"]] == ["write", "read", None, None], k
assert g["decision"]["verdict"] == "adoptable", g["decision"]
assert dest[0]["launches"] == 3, dest
print("PASS: linked by name: the module load kept the image, the instantiate read the graph back, 3 launches seen (one through dlsym on the driver's handle)")
PY
# A library opened RTLD_LOCAL that links the driver: its calls reach the driver through the exports
# (the driver is out of RTLD_NEXT's sight), and are observed.
local_plain=$("$work/app_local" "$work/libuser.so" "$fatbin")
local=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_LOG="$work/local.jsonl" "$work/app_local" "$work/libuser.so" "$fatbin" || true)
echo "opened RTLD_LOCAL: plain: $local_plain; preloaded, logging: $local"
[ "$local_plain" = PASS ] && [ "$local" = PASS ] || { echo "FAIL: the RTLD_LOCAL library failed under the interposer"; exit 1; }
python3 - "$work/local.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
inst = [l for l in lines if l["event"] == "instantiate"]
dest = [l for l in lines if l["event"] == "exec_destroy"]
assert len(inst) == 1 and inst[0]["decision"]["verdict"] == "adoptable", lines
assert len(dest) == 1 and dest[0]["launches"] == 2, dest
print("PASS: a library opened RTLD_LOCAL: its driver calls forwarded and observed (adoptable, 2 launches)")
PY
# A process that loads no driver runs unchanged under the interposer (the GPU-less machine's case):
# its output, and what dlsym and ctypes find, are those of the plain run.
probe='import ctypes, ctypes.util
print(ctypes.util.find_library("cuda"))
try:
    ctypes.CDLL("libcuda.so.1"); print("libcuda loaded")
except OSError as e:
    print("no libcuda")
libc = ctypes.CDLL(None)
print([bool(libc.dlsym(ctypes.c_void_p(0), n)) for n in (b"cuGraphLaunch", b"cuModuleLoadData", b"strlen")])'
want=$(python3 -c "$probe" 2>&1)
got=$(LD_PRELOAD="$lib" OSTINATO_PRELOAD_LOG="$work/none.jsonl" python3 -c "$probe" 2>&1)
echo "no driver: plain: $(echo $want) | preloaded: $(echo $got)"
[ "$want" = "$got" ] || { echo "FAIL: a process without a driver ran differently under the interposer"; exit 1; }
