// The column panels every packed weight layout of ops/linear/cpu shares: w's
// output columns cut into panels of kPanel, each panel's K rows stored
// together, so that a register tile's pass over k reads one sequential
// stream (rows_matmul's float32, and the int8 and bf16 layouts of
// packed_matmul_cpu.h).
#pragma once

#include <cstdint>

namespace nmt::ops::cpu {

inline constexpr int64_t kPanel = 64;  // output columns per panel

inline int64_t panels(int64_t out) { return (out + kPanel - 1) / kPanel; }

}  // namespace nmt::ops::cpu
