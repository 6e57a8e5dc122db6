#!/usr/bin/env bash
# Here (the developer machine): downloads the Vulkan loader and GL vendor-neutral libraries as .deb
# files into .gl/ (ignored), for the GPU machine, which has NVIDIA's ICD but no loader. Name `.gl` in
# the device call's `carry`; scripts/gpu-check.sh unpacks it.
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx '/.gl/' .git/info/exclude || echo '/.gl/' >> .git/info/exclude
mkdir -p .gl /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
apt-get $o update
(cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
ls -la .gl
