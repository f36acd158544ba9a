// Naive CPU attention: the readable reference implementation.
//
// Every (b, h) head is handled by one OpenMP thread with plain loops over
// (i, j, c) and explicit row-major flat offsets. The scores and the
// probabilities are materialized as a [B, H, Tq, Tk] buffer (p.probs), which
// is exactly what the flash kernels avoid; the backward pass reads the
// stored probabilities back instead of recomputing them. Attention dropout's
// multipliers are drawn per head into a [Tk, Tq] buffer, forward and backward
// alike (attention_params.h gives their coordinates).
#include "ops/attention/cpu/attention_cpu.h"
#include "ops/cpu_simd.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace nmt::ops::cpu::NMT_KERNEL_ISA {
namespace {

// Number of keys batch row b may attend to (key_lengths masks the rest).
int64_t visible_keys(const int64_t* key_lengths, int64_t b, int64_t k_len) {
  if (key_lengths == nullptr) return k_len;
  return std::clamp<int64_t>(key_lengths[b], 0, k_len);
}

// Plain dot product of two length-n rows; the simd reduction lets the
// compiler use vector registers without -ffast-math.
template <typename T>
T dot(const T* a, const T* b, int64_t n) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t c = 0; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

// Attention dropout's multipliers of head (b, h): m[j * Tq + i] for query i
// and key j (0 or 1/(1-p)); no buffer (data() null) when p = 0. (An
// AlignedBuffer, not a std::vector: growing a vector here would emit its
// methods compiled for this instruction set as weak symbols that the
// linker may pick for every other caller; tests/check_kernel_isa.sh.)
template <typename T>
void head_multipliers(const philox::DropoutStream& s, int64_t b, int64_t h, int64_t heads, int64_t q_len,
                      int64_t k_len, detail::AlignedBuffer<T>& m) {
  if (!(s.p > 0)) return;
  m.reset(q_len * k_len);
  for (int64_t j = 0; j < k_len; ++j) philox::mask_row<T>(s, b * heads + h, j, q_len, m.data() + j * q_len);
}

}  // namespace

template <typename T>
void naive_attention_forward(const AttentionForwardParams<T>& p) {
  const int64_t B = p.batch, H = p.heads, Tq = p.q_len, Tk = p.k_len, D = p.head_dim;
  const T neg_inf = -std::numeric_limits<T>::infinity();

#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const T* q = p.q + b * p.q_stride_b + h * p.q_stride_h;  // q: [Tq, D], row stride q_stride_t
      const int64_t kb = kv_row(p, b);
      const T* k = p.k + kb * p.k_stride_b + h * p.k_stride_h;  // k: [Tk, D], row stride k_stride_t
      const T* v = p.v + kb * p.v_stride_b + h * p.v_stride_h;  // v: [Tk, D], row stride v_stride_t
      const int64_t valid = visible_keys(p.key_lengths, b, Tk);

      // The caller normally provides probs; without it we still need the
      // row buffer, so keep a private one for this head.
      std::vector<T> own_probs;
      if (p.probs == nullptr) own_probs.resize(static_cast<size_t>(Tq * Tk));
      detail::AlignedBuffer<T> mult;  // [Tk, Tq] attention dropout multipliers, none without
      head_multipliers(p.dropout, b, h, H, Tq, Tk, mult);

      for (int64_t i = 0; i < Tq; ++i) {
        // att: [Tk], row i of probs [B, H, Tq, Tk]; holds scores, then probabilities.
        T* att = p.probs != nullptr ? p.probs + ((b * H + h) * Tq + i) * Tk
                                    : own_probs.data() + i * Tk;
        T* o = p.o + b * p.o_stride_b + h * p.o_stride_h + i * p.o_stride_t;  // o: [D], row i of o
        const T* q_i = q + i * p.q_stride_t;      // q_i: [D]

        // pass 1: scores s * q_i . k_j, masked entries -inf, track the row max
        T maxval = neg_inf;
        for (int64_t j = 0; j < Tk; ++j) {
          const bool visible = j < valid && (!p.causal || j <= i);
          if (!visible) {
            att[j] = neg_inf;
            continue;
          }
          att[j] = p.scale * dot(q_i, k + j * p.k_stride_t, D);
          maxval = std::max(maxval, att[j]);
        }

        // A row that sees no key has no distribution: define it as o = 0,
        // lse = -inf rather than producing 0/0.
        if (maxval == neg_inf) {
          std::fill(att, att + Tk, T(0));
          std::fill(o, o + D, T(0));
          if (p.lse != nullptr) p.lse[(b * H + h) * Tq + i] = neg_inf;
          continue;
        }

        // pass 2: softmax; subtracting the max keeps exp() from overflowing
        T expsum = 0;
        for (int64_t j = 0; j < Tk; ++j) {
          const T e = std::exp(att[j] - maxval);  // exp(-inf) = 0 for masked keys
          att[j] = e;
          expsum += e;
        }
        const T inv_sum = T(1) / expsum;
        for (int64_t j = 0; j < Tk; ++j) att[j] *= inv_sum;
        if (p.lse != nullptr) p.lse[(b * H + h) * Tq + i] = maxval + std::log(expsum);

        // pass 3: o_i = sum_j P_ij v_j (P_ij M_ij under dropout; probs keeps P)
        std::fill(o, o + D, T(0));
        for (int64_t j = 0; j < valid; ++j) {
          const T p_ij = mult.data() == nullptr ? att[j] : att[j] * mult.data()[j * Tq + i];
          if (p_ij == T(0)) continue;  // masked (causal) keys contribute nothing
          const T* v_j = v + j * p.v_stride_t;  // v_j: [D]
#pragma omp simd
          for (int64_t c = 0; c < D; ++c) o[c] += p_ij * v_j[c];
        }
      }
    }
  }
}

template <typename T>
void naive_attention_backward(const AttentionBackwardParams<T>& p) {
  const int64_t B = p.batch, H = p.heads, Tq = p.q_len, Tk = p.k_len, D = p.head_dim;

#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const T* q = p.q + b * p.q_stride_b + h * p.q_stride_h;  // q: [Tq, D], row stride q_stride_t
      const T* k = p.k + b * p.k_stride_b + h * p.k_stride_h;  // k: [Tk, D], row stride k_stride_t
      const T* v = p.v + b * p.v_stride_b + h * p.v_stride_h;  // v: [Tk, D], row stride v_stride_t
      T* dk = p.dk + b * p.dk_stride_b + h * p.dk_stride_h;  // dk: [Tk, D], row stride dk_stride_t
      T* dv = p.dv + b * p.dv_stride_b + h * p.dv_stride_h;  // dv: [Tk, D], row stride dv_stride_t
      const int64_t valid = visible_keys(p.key_lengths, b, Tk);

      // dK and dV gather contributions from every query row of this head,
      // and this thread owns the head, so plain accumulation is race-free.
      for (int64_t j = 0; j < Tk; ++j) {
        std::fill(dk + j * p.dk_stride_t, dk + j * p.dk_stride_t + D, T(0));
        std::fill(dv + j * p.dv_stride_t, dv + j * p.dv_stride_t + D, T(0));
      }
      std::vector<T> dp(static_cast<size_t>(Tk));  // dP row, then dS row
      detail::AlignedBuffer<T> mult;  // [Tk, Tq] attention dropout multipliers, none without
      head_multipliers(p.dropout, b, h, H, Tq, Tk, mult);

      for (int64_t i = 0; i < Tq; ++i) {
        const T* att = p.probs + ((b * H + h) * Tq + i) * Tk;  // att: [Tk], row i of probs
        const T* d_o = p.d_o + b * p.do_stride_b + h * p.do_stride_h + i * p.do_stride_t;  // d_o: [D]
        const T* q_i = q + i * p.q_stride_t;                   // q_i: [D]
        T* dq = p.dq + b * p.dq_stride_b + h * p.dq_stride_h + i * p.dq_stride_t;  // dq: [D]
        std::fill(dq, dq + D, T(0));

        // pass 1: dV_j += P_ij dO_i and dP_ij = dO_i . v_j; under dropout
        // the output applied P_ij M_ij, so dV_j takes that and dP_ij is M_ij
        // times the product.
        for (int64_t j = 0; j < valid; ++j) {
          const T m_ij = mult.data() == nullptr ? T(1) : mult.data()[j * Tq + i];
          const T p_ij = att[j] * m_ij;
          T* dv_j = dv + j * p.dv_stride_t;
#pragma omp simd
          for (int64_t c = 0; c < D; ++c) dv_j[c] += p_ij * d_o[c];
          dp[j] = m_ij * dot(d_o, v + j * p.v_stride_t, D);
        }

        // pass 2: softmax backward, dS_ij = P_ij (dP_ij - sum_j' P_ij' dP_ij')
        T row_dot = 0;
        for (int64_t j = 0; j < valid; ++j) row_dot += att[j] * dp[j];
        for (int64_t j = 0; j < valid; ++j) dp[j] = att[j] * (dp[j] - row_dot);

        // pass 3: dQ_i = s sum_j dS_ij k_j and dK_j += s dS_ij q_i
        for (int64_t j = 0; j < valid; ++j) {
          const T ds_ij = p.scale * dp[j];
          if (ds_ij == T(0)) continue;  // masked keys (P = 0)
          const T* k_j = k + j * p.k_stride_t;
          T* dk_j = dk + j * p.dk_stride_t;
#pragma omp simd
          for (int64_t c = 0; c < D; ++c) {
            dq[c] += ds_ij * k_j[c];
            dk_j[c] += ds_ij * q_i[c];
          }
        }
      }
    }
  }
}

template void naive_attention_forward<float>(const AttentionForwardParams<float>&);
template void naive_attention_forward<double>(const AttentionForwardParams<double>&);
template void naive_attention_backward<float>(const AttentionBackwardParams<float>&);
template void naive_attention_backward<double>(const AttentionBackwardParams<double>&);

}  // namespace nmt::ops::cpu::NMT_KERNEL_ISA
