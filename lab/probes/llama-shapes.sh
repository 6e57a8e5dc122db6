#!/usr/bin/env bash
# The streaming projections per stage geometry at Llama-3.2-1B's and -3B's shapes, in one GPU-machine
# call, from a folder D holding lab/probes/llama_stream_shapes.cu built per geometry on the developer
# machine as D/llama_stream_shapes_<stages>x<bytes> (nvcc -O3 -arch=sm_90 -std=c++17 -Ikernels
# -DOST_TRIGGER=3 -DLB_STAGES=<stages> -DLB_STAGE_BYTES=<bytes>). Prints each binary's check and timing.
#   bash llama-shapes.sh D
set -u
D=$(cd "${1:?folder}" && pwd)
status=0
for b in "$D"/llama_stream_shapes_*; do
  for shape in "2048 8192 16" "3072 8192 28"; do
    echo "== $(basename "$b") $shape"
    timeout 60 "$b" $shape || status=1
  done
done
exit $status
