#!/usr/bin/env bash
# float32 GEMM libraries at configs/real.yaml's step shapes (build/gemm_libraries):
# OpenBLAS with the kernels it picks by itself, with the kernels that fit
# the CPU (OPENBLAS_CORETYPE=SkylakeX on AVX-512, Haswell on AVX2: what nmt
# sets where OpenBLAS fell back to generic ones), and oneDNN's sgemm; and
# the same with both libraries held to AVX2 (Haswell, DNNL_MAX_CPU_ISA=AVX2),
# what an AVX2-only machine runs. One table each, in this order. Intel
# MKL (libmkl_rt, Debian non-free) is a third column where installed, nmt's
# own sgemm (src/ops/linear/cpu/sgemm_cpu.h) the fourth. The last table is
# AVX2 again with OpenMP's threads spinning between calls
# (OMP_WAIT_POLICY=ACTIVE), as a training run runs oneDNN's and nmt's,
# without OpenBLAS (its pool and a spinning OpenMP one take turns, and
# its calls would disturb the others' samples).
#
# Usage: bench/bench_gemm_libraries.sh [--threads N] [--samples S]
#   NMT_BUILD_DIR: the build folder holding gemm_libraries (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
prog=${NMT_BUILD_DIR:-build}/gemm_libraries
[ -x "$prog" ] || { echo "bench_gemm_libraries: no $prog (cmake --build build --target gemm_libraries)" >&2; exit 2; }
fit=$(grep -qw avx512bw /proc/cpuinfo && echo SkylakeX || echo Haswell)
echo "## OpenBLAS as it chooses"
env -u OPENBLAS_CORETYPE "$prog" "$@"
if [ "$fit" = SkylakeX ]; then
  echo; echo "## OpenBLAS with OPENBLAS_CORETYPE=SkylakeX"
  OPENBLAS_CORETYPE=SkylakeX "$prog" "$@"
fi
echo; echo "## AVX2 (bench/avx2_env.sh: OPENBLAS_CORETYPE=Haswell, DNNL_MAX_CPU_ISA=AVX2)"
(source bench/avx2_env.sh; "$prog" "$@")
echo; echo "## AVX2, OpenMP's threads spinning (OMP_WAIT_POLICY=ACTIVE, as in training)"
(source bench/avx2_env.sh; OMP_WAIT_POLICY=ACTIVE "$prog" --no-openblas "$@")
