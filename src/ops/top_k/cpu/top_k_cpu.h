// What beam search needs of a row of next-token logits: its log-softmax
// normalizer and its K largest entries. A hypothesis's candidates are its
// score plus log_softmax(x)[t]; the normalizer is the same for the whole row,
// so the row's K best candidates are its K largest logits, and the sentence's
// K best are among its hypotheses' K best each. One pass for the maximum and
// the K largest, one for the sum of exponentials (each term in float, the
// sum in double: the normalizer within 3e-7 of log_softmax on the row widened
// to double): no [rows, V] log-probability tensor, no full sort.
// Plain C++ kernels, compiled per instruction set (ops/cpu_isa.h).
#pragma once

#include <cstdint>

#include "ops/cpu_isa.h"

namespace nmt::ops::cpu {

struct TopKParams {
  const float* x;       // x: [cols], one row of logits (finite or -inf; -inf never chosen)
  int64_t cols;         // >= 1
  int64_t k;            // >= 1
  // Written: log_softmax(x)[t] = (x[t] - max) - log_sum, in double.
  float* max;           // the row's largest value
  double* log_sum;      // log(sum_t exp(x[t] - max))
  // Written: the k largest entries, largest first, equal values in index
  // order (the lower index first); fewer than k finite entries leave
  // index -1 (and value -inf) in the remaining places.
  int64_t* top_index;   // [k]
  float* top_value;     // [k]
  bool normalizer = true;  // false: only the k largest (max and log_sum untouched)
};

#define NMT_DECLARE_TOP_K_KERNELS(isa) \
  namespace isa {                      \
  void log_softmax_top_k(const TopKParams& p); \
  }
NMT_FOR_EACH_KERNEL_ISA(NMT_DECLARE_TOP_K_KERNELS)
#undef NMT_DECLARE_TOP_K_KERNELS

inline void log_softmax_top_k(const TopKParams& p) { NMT_CPU_DISPATCH(log_softmax_top_k, p); }

}  // namespace nmt::ops::cpu
