#!/usr/bin/env bash
# Packs a CUDA build of nmt (scripts/build_cuda.sh) for a GPU host that has
# a CUDA PyTorch of the same version but none of Debian's libraries and no
# package access: the executables scripts/gpu_check.sh runs, laid out as a
# build folder, plus the shared libraries they need beyond glibc, the C++
# runtime and LibTorch/CUDA (yaml-cpp, spdlog, fmt, SentencePiece, libmicrohttpd and
# theirs), and the SentencePiece shim. LibTorch, CUDA, cuDNN and NCCL are
# taken from the host's torch.
#
# Usage: scripts/gpu_bundle_build.sh [--build-dir build-cuda] OUT
# On the GPU host, in the repository root:
#   source OUT/env.sh [PYTHON]    # LD_LIBRARY_PATH: OUT/lib, then the host torch's libraries
#   scripts/gpu_check.sh --build-dir OUT
# env.sh fails, naming the library, when nmt does not start there; OUT/lib-cxx
# holds this machine's libstdc++ for a host whose own is older.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-cuda
while (($#)); do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_bundle_build: unknown argument $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
out=${1:?usage: gpu_bundle_build.sh [--build-dir DIR] OUT}
[ -x "$build/nmt" ] || { echo "gpu_bundle_build: no $build/nmt (run scripts/build_cuda.sh first)" >&2; exit 2; }
exes=(nmt tests/nmt_tests tests/flash_standalone_test)
rm -rf "$out"
mkdir -p "$out/tests" "$out/lib" "$out/lib-cxx"
for e in "${exes[@]}"; do
  [ -x "$build/$e" ] || { echo "gpu_bundle_build: no $build/$e" >&2; exit 2; }
  strip --strip-unneeded -o "$out/$e" "$build/$e"
done
# The SentencePiece shim, which nmt loads from beside itself (dlmopen).
[ -f "$build/libnmt_spm.so" ] || { echo "gpu_bundle_build: no $build/libnmt_spm.so" >&2; exit 2; }
cp "$build/libnmt_spm.so" "$out/"
# Libraries the loader found outside the torch wheel, except those every
# Linux host has.
base='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libutil|libresolv|libstdc\+\+|libgcc_s)\.so'
for e in "${exes[@]}" libnmt_spm.so; do
  ldd "$build/$e" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  case $path in */site-packages/*) continue ;; esac
  if [[ $name =~ $base ]]; then
    [[ $name =~ ^lib(stdc\+\+|gcc_s) ]] && cp -L "$path" "$out/lib-cxx/$name"
    continue
  fi
  cp -L "$path" "$out/lib/$name"
done
cat >"$out/env.sh" <<'EOF'
# source OUT/env.sh [PYTHON]: the loader path for the bundled nmt on this host.
_b=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_py=${1:-python3}
_site=$("$_py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))') || return 1
_libs=$_b/lib:$_site/torch/lib
for _d in "$_site"/nvidia/*/lib; do _libs=$_libs:$_d; done
export LD_LIBRARY_PATH=$_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ! LD_BIND_NOW=1 "$_b/nmt" --version >/dev/null 2>&1; then
  export LD_LIBRARY_PATH=$_b/lib-cxx:$LD_LIBRARY_PATH
  LD_BIND_NOW=1 "$_b/nmt" --version >/dev/null || { echo "env.sh: $_b/nmt does not start here" >&2; return 1; }
fi
unset _b _py _site _libs _d
EOF
du -sh "$out" | sed 's/^/gpu_bundle_build: /' >&2
