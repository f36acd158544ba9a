#!/usr/bin/env bash
# The CPU kernels are compiled once per instruction set. Checks, on the object
# files, that (1) every weak symbol an ISA's objects define lives in that ISA's
# namespace, so the linker cannot hand an AVX-512 copy of an inline function
# to the generic path, and (2) the generic copy has no AVX instructions and
# the avx2 copy no AVX-512 ones, and (3) the avx2 copy's ReLU backward, a
# select on a comparison, is a vector loop (ymm compares): without AVX-512's
# masked operations GCC keeps it scalar unless the kernels are built with
# -fno-trapping-math (CMakeLists.txt), and it ran 2.4x slower so.
# Usage: check_kernel_isa.sh ISA OBJECT...
set -u
isa=$1
shift
fail=0
[ $# -gt 0 ] || { echo "FAIL: no object files given"; exit 1; }
symbols=$(nm -C --defined-only "$@") || { echo "FAIL: nm could not read $*"; exit 1; }
# A name the demangler cannot render (c++filt gives up on some array-typed
# template arguments) stays mangled: its namespace is then the mangled
# prefix, N3nmt3ops3cpu followed by the ISA's length and name.
leaks=$(grep -E ' [WVu] ' <<<"$symbols" | grep -v 'DW.ref.__gxx_personality_v0' |
  grep -v "nmt::ops::cpu::${isa}::" | grep -v "N3nmt3ops3cpu${#isa}${isa}")
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
  # Disassembled once, names demangled (the ReLU check below finds its function by name).
  code=$(objdump -d -C --no-show-raw-insn "$@") || { echo "FAIL: objdump could not read $*"; exit 1; }
  n=$(grep -cE "$forbidden" <<<"$code")
  if [ "$n" -ne 0 ]; then
    echo "FAIL: $n instructions of a wider instruction set in the $isa kernels"
    fail=1
  fi
fi
if [ "$isa" = avx2 ]; then
  relu=$(awk '/^[0-9a-f]+ </ { p = 0 } /^[0-9a-f]+ <.*avx2::bias_relu_dropout_backward<float, float>/ { p = 1 } p' <<<"$code")
  [ -n "$relu" ] || { echo "FAIL: no avx2::bias_relu_dropout_backward<float, float> in the objects"; fail=1; }
  if [ -n "$relu" ] && ! grep -qE 'vcmp[a-z]*ps .*%ymm' <<<"$relu"; then
    echo "FAIL: the avx2 ReLU backward compares no vectors: a scalar loop (built without -fno-trapping-math?)"
    fail=1
  fi
fi
[ $fail -eq 0 ] && echo "kernels ($isa): isolated; 1 passed, 0 failed" || echo "kernels ($isa): 0 passed, 1 failed"
exit $fail
