#!/usr/bin/env bash
# Download the Debian packages that a GPU build host without package access needs,
# besides a CUDA-enabled LibTorch (which that host already has through its PyTorch install).
# Usage: gpu_bundle_debs.sh OUTDIR     (run on a Debian bookworm machine that reaches Debian's archive)
set -euo pipefail
out=${1:?usage: gpu_bundle_debs.sh OUTDIR}
mkdir -p "$out"
cd "$out"
apt-get download \
  libyaml-cpp-dev libyaml-cpp0.7 \
  libsentencepiece-dev libsentencepiece0 \
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 \
  libgtest-dev libcli11-dev \
  libgfortran5 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
echo "$(ls -1 ./*.deb | wc -l) packages in $PWD"
