#!/usr/bin/env bash
# The CPU kernels are compiled once per instruction set. Checks, on the object
# files, that (1) every weak symbol an ISA's objects define lives in that ISA's
# namespace, so the linker cannot hand an AVX-512 copy of an inline function
# to the generic path, and (2) the generic copy has no AVX instructions and
# the avx2 copy no AVX-512 ones.
# Usage: check_kernel_isa.sh ISA OBJECT...
set -u
isa=$1
shift
fail=0
[ $# -gt 0 ] || { echo "FAIL: no object files given"; exit 1; }
symbols=$(nm -C --defined-only "$@") || { echo "FAIL: nm could not read $*"; exit 1; }
leaks=$(grep -E ' [WVu] ' <<<"$symbols" | grep -v 'DW.ref.__gxx_personality_v0' |
  grep -v "nmt::ops::cpu::${isa}::")
if [ -n "$leaks" ]; then
  echo "FAIL: weak symbols outside nmt::ops::cpu::${isa}:"
  echo "$leaks"
  fail=1
fi
case $isa in
  generic) forbidden='%ymm|%zmm' ;;
  avx2) forbidden='%zmm' ;;
  *) forbidden='' ;;
esac
if [ -n "$forbidden" ]; then
  code=$(objdump -d "$@") || { echo "FAIL: objdump could not read $*"; exit 1; }
  n=$(grep -cE "$forbidden" <<<"$code")
  if [ "$n" -ne 0 ]; then
    echo "FAIL: $n instructions of a wider instruction set in the $isa kernels"
    fail=1
  fi
fi
[ $fail -eq 0 ] && echo "kernels ($isa): isolated; 1 passed, 0 failed" || echo "kernels ($isa): 0 passed, 1 failed"
exit $fail
