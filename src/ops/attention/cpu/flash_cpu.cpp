// The flash kernels for float and bf16 tensors (flash_cpu_impl.h).
#include "ops/attention/cpu/flash_cpu_impl.h"

namespace nmt::ops::cpu::NMT_KERNEL_ISA {

template void flash_attention_forward<float, float>(const AttentionForwardParams<float>&);
template void flash_attention_forward<bf16, float>(const AttentionForwardParams<bf16, float>&);
template void flash_attention_backward<float, float>(const AttentionBackwardParams<float>&);
template void flash_attention_backward<bf16, float>(const AttentionBackwardParams<bf16, float>&);

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
