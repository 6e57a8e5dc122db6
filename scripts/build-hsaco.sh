#!/usr/bin/env bash
# Builds the AMD code objects of the built-in kernels (kernels/amdgpu/ostinato.cl) for every target
# the HSA backend ships, into kernels/amdgpu/hsaco/ (or the folder given as $1), and the example user
# kernel examples/kernels/user_mix.hsaco (or into the folder given as $2), with clang 19 (Debian's
# clang-19 has the AMDGPU target; .ci/run installs it). The objects are committed: the backend embeds
# them, so building Ostinato needs no AMDGPU compiler. The test `hsaco_drift` rebuilds them with this
# script and fails if a committed object differs from what its source compiles to.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-kernels/amdgpu/hsaco}"
clang="${OSTINATO_CLANG:-$(command -v clang-19 || echo /usr/lib/llvm-19/bin/clang)}"
if [ ! -x "$clang" ]; then
  echo "build-hsaco: clang 19 not found (apt-get install clang-19 lld-19)" >&2
  exit 2
fi
mkdir -p "$out"
for target in $(cat kernels/amdgpu/targets); do
  "$clang" -x cl -cl-std=CL2.0 --target=amdgcn-amd-amdhsa -mcpu="$target" -mcode-object-version=5 -nogpulib -O2 \
    -ffile-prefix-map="$PWD"=. kernels/amdgpu/ostinato.cl -o "$out/ostinato-$target.hsaco"
done
# The example of a user's own code object (examples/own_kernel.toml).
"$clang" -x cl -cl-std=CL2.0 --target=amdgcn-amd-amdhsa -mcpu=gfx1100 -mcode-object-version=5 -nogpulib -O2 \
  -ffile-prefix-map="$PWD"=. examples/kernels/user_mix.cl -o "${2:-examples/kernels}/user_mix.hsaco"
"$clang" --version | head -1 > "$out/COMPILER"
