#!/usr/bin/env bash
# On the GPU build host: unpack the bundled .debs into a private prefix (never into /),
# then print the environment a CMake build needs to find them and a CUDA LibTorch.
# Usage: source <(gpu_unpack_debs.sh DEBDIR [PREFIX])
set -euo pipefail
debs=${1:?usage: gpu_unpack_debs.sh DEBDIR [PREFIX]}
prefix=${2:-/opt/nmt-deps}
mkdir -p "$prefix"
for f in "$debs"/*.deb; do dpkg-deb -x "$f" "$prefix"; done
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
lib="$prefix/usr/lib/x86_64-linux-gnu"
echo "export CMAKE_PREFIX_PATH=$prefix/usr:$prefix/usr/share${torch_prefix:+:$torch_prefix}\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
echo "export LD_LIBRARY_PATH=$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
echo "export PKG_CONFIG_PATH=$lib/pkgconfig"
echo "export PKG_CONFIG_SYSROOT_DIR=$prefix"
