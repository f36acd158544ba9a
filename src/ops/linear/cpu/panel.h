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
inline int64_t groups(int64_t in, int64_t group) { return (in + group - 1) / group; }

// Where element (k, n) of w [K, N] goes: panel n / kPanel, then the group of
// `group` consecutive k that one instruction reads together (k / group), then
// column n % kPanel, then k % group. Layout [panels(N)][ceil(K / group)]
// [kPanel][group], zero-padded; group 1 is float32's [panels(N)][K][kPanel].
inline int64_t panel_index(int64_t k, int64_t n, int64_t in, int64_t group = 1) {
  return ((n / kPanel * groups(in, group) + k / group) * kPanel + n % kPanel) * group + k % group;
}

}  // namespace nmt::ops::cpu
