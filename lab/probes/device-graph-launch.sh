#!/usr/bin/env bash
# Builds and runs lab/probes/device_graph_launch.cu on the GPU machine (needs the CUDA toolkit's
# nvcc, libcudadevrt.a and NVRTC), twice: with relocatable device code and the device runtime (every
# arm) and without (host-launch arms only); then lab/probes/driver_api_chain.cpp (no CUDA runtime
# in the process). Logs go to $OUT/device-graph-launch{,-plain}.log and $OUT/driver-api-chain.log.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp}
export PATH=/usr/local/cuda/bin:$PATH
nvcc --version | tail -n 2
nvcc -O2 -std=c++17 -arch=native -rdc=true device_graph_launch.cu -o /tmp/device_graph_launch -lcudadevrt -lcuda -lnvrtc
nvcc -O2 -std=c++17 -arch=native -DNO_DEVICE_LAUNCH device_graph_launch.cu -o /tmp/device_graph_launch_plain -lcuda -lnvrtc
g++ -O2 -std=c++17 -I/usr/local/cuda/include driver_api_chain.cpp -o /tmp/driver_api_chain -L/usr/local/cuda/lib64 -L/usr/local/cuda/lib64/stubs -lcuda -lnvrtc
nvidia-smi --query-gpu=name,uuid,driver_version --format=csv,noheader
/tmp/device_graph_launch 2>&1 | tee "$OUT/device-graph-launch.log"
/tmp/device_graph_launch_plain 2>&1 | tee "$OUT/device-graph-launch-plain.log"
/tmp/driver_api_chain 2>&1 | tee "$OUT/driver-api-chain.log"
