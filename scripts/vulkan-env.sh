# Sourced by the GPU-machine scripts: NVIDIA's Vulkan ICD is on the machine, the loader is carried in as
# .deb files (.gl/, from scripts/fetch-vulkan-loader.sh). Without them the bench's Vulkan arm is skipped.
if compgen -G ".gl/*.deb" >/dev/null; then
  if ! ldconfig -p | grep -q libvulkan.so.1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
  fi
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
