// The flash kernels for float64 tensors (flash_cpu_impl.h): what the tests
// check every backend against, never a model's dtype. Compiled at -O1
// (CMakeLists.txt): at -O3 they were a third of the kernels' largest
// compile unit (docs/bench/build_time.md), for speed nothing needs.
#include "ops/attention/cpu/flash_cpu_impl.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

template void flash_attention_forward<double, double>(const AttentionForwardParams<double>&);
template void flash_attention_backward<double, double>(const AttentionBackwardParams<double>&);

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
