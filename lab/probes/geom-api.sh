#!/usr/bin/env bash
# The bench's geometry kernel (`geom_mix`, crates/ostinato-bench/kernels/geometry.{cu,wgsl}) on CUDA and on
# Vulkan, node by node: for each block × grid shape, one launch alone and ten independent launches (each
# on an output of its own, reading one shared input, as the independent rows run them), replayed traced
# (`ostinato run --trace`: CUPTI's kernel records on CUDA, timestamp queries around each dispatch on
# Vulkan). Prints per shape and arm the median over the replays of the replay's time on the device
# (first start to last end) and of one node's bar. This separates the kernel's time on the device from
# how the launches are submitted, which the bench's rows measure together.
#   bash lab/probes/geom-api.sh [OSTINATO_BINARY] [OUT_DIR]     (from the repository root, on the GPU machine)
set -u
BIN=${1:-.devbin/ostinato}
OUT=${2:-${OUT:-/tmp/geom-api}}
REPLAYS=${REPLAYS:-50}
mkdir -p "$OUT/graphs"
source scripts/vulkan-env.sh >/dev/null 2>&1
# NVRTC reads no header from disk but ostinato.cuh: the kernel file with its guard's macro defined.
{ echo "#define OST_BENCH_geom_mix 1"; cat crates/ostinato-bench/kernels/geometry.cu; } >"$OUT/graphs/geom_mix.cu"

# graph FILE BLOCK(x,y,z) GRID(x,y,z) NODES
graph() {
  local file=$1 bx=$2 by=$3 bz=$4 gx=$5 gy=$6 gz=$7 nodes=$8
  local n=$((bx * by * bz * gx * gy * gz))
  local wgsl="geom_mix_${bx}x${by}x${bz}.wgsl"
  sed -e "s/WG_X/${bx}u/g" -e "s/WG_Y/${by}u/g" -e "s/WG_Z/${bz}u/g" crates/ostinato-bench/kernels/geometry.wgsl >"$OUT/graphs/$wgsl"
  {
    echo '[[kernel]]'
    echo 'name = "geom_mix"'
    echo 'params = [{ name = "out", access = "read_write" }, { name = "x", access = "read" }, { name = "n", scalar = "u32" }, { name = "salt", scalar = "u32" }]'
    echo 'cuda = { source = "geom_mix.cu", entry = "geom_mix" }'
    echo "vulkan = { source = \"$wgsl\", entry = \"main\" }"
    printf '[[buffer]]\nname = "x"\nsize = %d\ninit = "random:1"\n' $((4 * n))
    for k in $(seq 0 $((nodes - 1))); do
      printf '[[buffer]]\nname = "out%d"\nsize = %d\ninit = "random:%d"\n' "$k" $((4 * n)) $((k + 2))
    done
    for k in $(seq 0 $((nodes - 1))); do
      printf '[[node]]\nkernel = "geom_mix"\ngrid = [%d, %d, %d]\nblock = [%d, %d, %d]\nargs = { out = "out%d", x = "x", n = %d, salt = %d }\n' \
        "$gx" "$gy" "$gz" "$bx" "$by" "$bz" "$k" "$n" $((k + 1))
    done
  } >"$file"
}

summarise() {
  python3 - "$1" <<'EOF'
import json, statistics, sys
t = json.load(open(sys.argv[1]))
bars = [e for e in t["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "node"]
steps = [r["step_ns"] / 1e3 for r in t["otherData"]["replays"]]
print(f"replay {statistics.median(steps):8.3f} µs (min {min(steps):.3f})  bar {statistics.median(e['dur'] for e in bars):8.3f} µs  bars {len(bars)}")
EOF
}

status=0
# SHAPES="bx by bz gx gy gz;..." picks others (default: the independent rows raw Vulkan has won).
IFS=';' read -ra shapes <<<"${SHAPES:-1024 1 1 256 1 1;128 1 1 8192 1 1;32 8 1 64 16 1;8 8 4 4 4 4;512 1 1 64 1 1;1024 1 1 2048 1 1}"
for shape in "${shapes[@]}"; do
  # shellcheck disable=SC2086  # six numbers
  set -- $shape
  for nodes in 1 10; do
    name="b$1x$2x$3-g$4x$5x$6-n$nodes"
    graph "$OUT/graphs/$name.toml" "$@" "$nodes"
    for arm in "cuda --fusion off" "cuda" "vulkan"; do
      tag=$(echo "$arm" | tr -d ' -')
      log="$OUT/$name-$tag.log"
      if timeout 120 "$BIN" run "$OUT/graphs/$name.toml" --backend $arm --replays "$REPLAYS" --trace "$OUT/$name-$tag.json" >"$log" 2>&1; then
        printf '%-28s %-18s ' "$name" "$arm"; summarise "$OUT/$name-$tag.json"
      else
        printf '%-28s %-18s failed (%s)\n' "$name" "$arm" "$(tail -1 "$log")"; status=1
      fi
    done
  done
done
# What NVRTC made of the kernel (registers, the contract read from its code), for one block shape.
"$BIN" kernels "$OUT/graphs/$name.toml" --backend cuda >"$OUT/kernels.log" 2>&1 || status=1
grep -iE "regist|shared|local|spill" "$OUT/kernels.log" | head -8
exit $status
