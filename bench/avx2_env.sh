# Sourced by the bench scripts for --isa avx2: holds every library in the
# comparison to its AVX2 kernels on an AVX-512 CPU, as an AVX2-only machine
# runs them. nmt's own kernels (NMT_CPU_ISA), OpenBLAS (Haswell kernels, for
# nmt and Debian's PyTorch), PyTorch's vectorized ops (ATEN_CPU_CAPABILITY),
# MKL (PyTorch's wheel, CTranslate2), oneDNN, CTranslate2's own kernels.
# AVX2_SETTINGS names them for the reports.
export AVX2_SETTINGS="NMT_CPU_ISA=avx2 OPENBLAS_CORETYPE=Haswell ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 DNNL_MAX_CPU_ISA=AVX2 CT2_FORCE_CPU_ISA=AVX2"
# shellcheck disable=SC2086  # one word per setting
export $AVX2_SETTINGS
