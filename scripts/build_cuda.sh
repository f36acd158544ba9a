#!/usr/bin/env bash
# Builds the complete nmt (every subcommand, the tests, the benchmarks) with
# CUDA: our attention kernels for the GPU, the LibTorch glue that runs them,
# and the NCCL process group for `nmt train --nproc N --device cuda`. The
# CUDA LibTorch is the one inside PyPI's torch wheel (headers, CMake files,
# libtorch_cuda.so, NCCL), taken from the peers' virtual environment
# (bench/peers_env.sh; installed there once per machine if missing). The rest
# (yaml-cpp, spdlog, SentencePiece, ...) is Debian's, as in the CPU build.
# A machine without a GPU builds and links; only running needs one
# (scripts/gpu_check.sh).
#
# Usage: scripts/build_cuda.sh [--build-dir DIR] [--arch "80;90"] [--jobs N] [--python PY]
#   defaults: build-cuda, sm_80 and sm_90, all cores, the peers' venv
#   --python PY: take the CUDA torch of this Python instead (a GPU host's own)
# Prints the build's time and `nmt --version`; exit 1 when the build fails,
# has a warning in our sources, or a library of nmt does not resolve.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-cuda arch="80;90" jobs=$(nproc) py=""
while (($#)); do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --arch) arch=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --python) py=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_cuda: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
command -v nvcc >/dev/null || { echo "build_cuda: no nvcc on PATH (the CUDA toolkit is needed to compile the kernels)" >&2; exit 2; }
[ -n "$py" ] || py=$(bench/peers_env.sh)
"$py" -c 'import torch' 2>/dev/null || { echo "build_cuda: $py cannot import torch" >&2; exit 2; }
read -r torch_version torch_cuda abi prefix site < <("$py" -c '
import os, torch
print(torch.__version__, torch.version.cuda, int(torch._C._GLIBCXX_USE_CXX11_ABI), torch.utils.cmake_prefix_path,
      os.path.dirname(os.path.dirname(torch.__file__)))')
[ "$torch_cuda" != None ] || { echo "build_cuda: torch $torch_version in $py is not a CUDA build" >&2; exit 2; }
# Debian's C++ libraries use the new std::string ABI; a LibTorch built with
# the old one would fail to link against them.
[ "$abi" = 1 ] || { echo "build_cuda: torch $torch_version uses the pre-C++11 ABI; Debian's libraries need the new one" >&2; exit 2; }
nvcc_version=$(nvcc --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
echo "build_cuda: torch $torch_version (CUDA $torch_cuda) from $prefix; nvcc $nvcc_version; sm $arch; $jobs jobs" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
# The wheel's LibTorch loads CUDA, cuDNN and NCCL from the wheel's nvidia/*
# folders, which are newer than the toolkit's (libtorch_cuda needs symbols
# of its NCCL that the toolkit's lacks). So they come first, for the linker
# (rpath-link) and for the loader (rpath): one libcudart and one libnccl per
# process, the ones LibTorch was built with. c10 is named outright: CMake's
# search would find Debian's libc10 (LibTorch 1.13) in /usr/lib first. So is
# the wheel's OpenMP runtime, which LibTorch's own threads use: one libgomp.
wheel_libs=$site/torch/lib
for d in "$site"/nvidia/*/lib; do wheel_libs=$wheel_libs:$d; done
link_flags="-Wl,-rpath,$wheel_libs -Wl,-rpath-link,$wheel_libs"
# LibTorch's config wants the architectures as "8.0;9.0" (else it runs a
# program to find the GPUs, which fails where there is none).
torch_archs=$(sed -E 's/([0-9])([0-9]+)/\1.\2/g' <<<"$arch")
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -Dc10_LIBRARY="$site/torch/lib/libc10.so" -DOpenMP_gomp_LIBRARY="$site/torch/lib/libgomp.so.1" \
  -DCMAKE_CUDA_RUNTIME_LIBRARY=Shared \
  -DCMAKE_EXE_LINKER_FLAGS="$link_flags" -DCMAKE_SHARED_LINKER_FLAGS="$link_flags" \
  -DNMT_REQUIRE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DNMT_CUDA_ARCHITECTURES="$arch" \
  -DTORCH_CUDA_ARCH_LIST="$torch_archs" >"$log" 2>&1 ||
  { cat "$log" >&2; echo "build_cuda: configuring failed" >&2; exit 1; }
grep -E '^-- nmt:' "$log" >&2 || true
# LibTorch's config warns that the wheel has no separate libkineto (it is
# inside libtorch_cpu); any other configure warning is shown.
grep -A3 'CMake Warning' "$log" | grep -v -e 'library kineto not found' -e '^--$' -e 'TorchConfig.cmake' \
  -e 'Call Stack' -e '^ *$' -e 'CMake Warning at .*TorchConfig' >&2 || true
if ! cmake --build "$build" -j "$jobs" >>"$log" 2>&1; then
  grep -E -A3 'error|FAILED' "$log" | head -60 >&2
  echo "build_cuda: the build failed (above)" >&2; exit 1
fi
elapsed=$(($(date +%s) - start))
# Warnings in our own sources fail the script; the toolkit's and LibTorch's
# headers are not ours to fix.
if grep -E "^(/[^:]*/)?(src|tests|bench)/[^:]*:[0-9]+:[0-9]+: warning|^$PWD/(src|tests|bench)/[^:]*\([0-9]+\): warning" "$log" >&2; then
  echo "build_cuda: warnings in our sources (above)" >&2; exit 1
fi
# ldd once, read as a string: `ldd | grep -m1` can end ldd with SIGPIPE,
# which pipefail would turn into a silent exit.
deps=$(ldd "$build/nmt")
missing=$(grep 'not found' <<<"$deps" || true)
[ -z "$missing" ] || { echo "build_cuda: $build/nmt does not resolve:" >&2; echo "$missing" >&2; exit 1; }
for lib in libtorch_cuda libc10.so libnccl libcudart libcublas.so; do
  where=$(grep -m1 "$lib" <<<"$deps" | sed 's/.*=> \([^ ]*\).*/\1/')
  [ -n "$where" ] || { echo "build_cuda: $build/nmt is not linked with $lib" >&2; exit 1; }
  case $(readlink -f "$where") in
    "$(readlink -f "$site")"/*) ;;
    *) echo "build_cuda: $build/nmt loads $lib from $where, not from the wheel in $site" >&2; exit 1 ;;
  esac
done
# Every symbol bound now, not at first call: a library of the wrong version
# shows here rather than in the middle of a training run.
LD_BIND_NOW=1 "$build/nmt" --version >/dev/null || { echo "build_cuda: $build/nmt does not start" >&2; exit 1; }
echo "build_cuda: built in $((elapsed / 60)) min $((elapsed % 60)) s: $build/nmt" >&2
"$build/nmt" --version
