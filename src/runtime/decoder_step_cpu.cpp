#include "runtime/decoder_step_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/fused_cpu_blocks.h"
#include "ops/activation/cpu/bias_relu_dropout_cpu.h"
#include "ops/embedding/cpu/embedding_cpu.h"

namespace nmt {

namespace {

// The step's scratch, carved out of one buffer.
struct StepBuffers {
  float* x;     // x: [B, C], the residual stream
  float* h;     // h: [B, C], its LayerNorm (what the next sublayer reads)
  float* qkv;   // qkv: [B, 3C]
  float* q;     // q: [B, C], cross-attention queries
  float* attn;  // attn: [B, C], attention output, heads side by side
  float* tmp;   // tmp: [B, C], a sublayer's output before the residual add
  float* ff;    // ff: [B, F]
  float* lse;   // lse: [B, H]
  float* probs; // probs: [B, H, max_keys] (naive attention only)
  float* mean;  // mean, rstd: [B] (LayerNorm statistics, unused here)
  float* rstd;
};

StepBuffers carve(float* w, int64_t B, int64_t C, int64_t H, int64_t F, int64_t max_keys) {
  StepBuffers b{};
  const auto take = [&w](int64_t n) { float* p = w; w += n; return p; };
  b.x = take(B * C), b.h = take(B * C), b.qkv = take(B * 3 * C), b.q = take(B * C);
  b.attn = take(B * C), b.tmp = take(B * C), b.ff = take(B * F), b.lse = take(B * H);
  b.probs = take(B * H * max_keys), b.mean = take(B), b.rstd = take(B);
  return b;
}

// y: [B, out] = x: [B, in] · w + bias
void matmul(const float* x, int64_t rows, const ops::PackedLinear& w, float* y) { w.forward(x, rows, w.in(), y); }

// x += y, h = LayerNorm(x) with weight g and bias b; post-norm, x = h after.
// Without y (the embeddings): h = LayerNorm(x), post-norm h = x.
void residual(float* x, const float* y, const float* g, const float* b, const DecoderStepParams& p,
              const StepBuffers& buf) {
  fused::residual(x, y, g, b, buf.h, buf.mean, buf.rstd, p.rows, p.channels, p.eps, p.post_norm);
}

// One query row per batch row against its keys.
//   q: [B, H, 1, D] at q with batch stride q_stride_b, heads D apart
//   kv: [B, Tk, 2C] (keys in columns [0, C), values in [C, 2C)), batch stride kv_stride_b;
//       with kv_rows ([B]), row b reads kv's batch row kv_rows[b]
//   key_lengths: [B], each <= k_len; o: [B, C]
//   record: null, or [H, k_len] for row 0's probabilities (one row, naive)
void attend(const float* q, int64_t q_stride_b, const float* kv, int64_t kv_stride_b, const int64_t* kv_rows,
            int64_t k_len, const int64_t* key_lengths, const DecoderStepParams& p, const StepBuffers& buf,
            float* record) {
  const int64_t C = p.channels, D = C / p.heads;
  ops::AttentionForwardParams<float> a{};
  a.q = q, a.k = kv, a.v = kv + C, a.o = buf.attn, a.lse = buf.lse, a.probs = buf.probs;
  a.key_lengths = key_lengths, a.kv_rows = kv_rows;
  a.q_stride_b = q_stride_b, a.q_stride_h = D, a.q_stride_t = q_stride_b;
  a.k_stride_b = a.v_stride_b = kv_stride_b, a.k_stride_h = a.v_stride_h = D, a.k_stride_t = a.v_stride_t = 2 * C;
  a.o_stride_b = C, a.o_stride_h = D, a.o_stride_t = C;
  a.batch = p.rows, a.heads = p.heads, a.q_len = 1, a.k_len = k_len, a.head_dim = D;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  a.causal = false;
  fused::attention(a, p.naive_attention);
  if (record != nullptr) std::memcpy(record, buf.probs, sizeof(float) * p.heads * k_len);
}

}  // namespace

int64_t decoder_step_workspace_floats(int64_t rows, int64_t channels, int64_t heads, int64_t ff_dim,
                                      int64_t max_keys) {
  return rows * (9 * channels + ff_dim + heads + heads * max_keys + 2);
}

void decoder_step_cpu(const DecoderStepParams& p) {
  const int64_t B = p.rows, C = p.channels;
  if (B == 0) return;
  const StepBuffers buf = carve(p.workspace, B, C, p.heads, p.ff_dim, std::max(p.max_len, p.src_len));

  // pass 1: x = embedding * sqrt(C) + position, each row at its own position;
  // h = norm1(x) of the first layer (post-norm: h = x).
  for (int64_t b = 0; b < B; ++b) {
    ops::cpu::EmbeddingParams<float> e{};
    e.ids = p.tokens + b, e.table = p.embedding, e.positions = p.position_table, e.out = buf.x + b * C;
    e.batch = 1, e.length = 1, e.channels = C, e.vocab = p.vocab, e.position_offset = p.positions[b];
    e.scale = p.embed_scale;
    ops::cpu::embedding_forward(e);
  }
  residual(buf.x, nullptr, p.norm1_w, p.norm1_b, p, buf);

  // Each row's new keys/values go to its own position; it sees positions
  // [0, position] of its own sentence.
  int64_t k_len = 0;
  for (int64_t b = 0; b < B; ++b) {
    p.key_lengths[b] = p.positions[b] + 1;
    k_len = std::max(k_len, p.key_lengths[b]);
  }

  for (const DecoderStepLayer& l : p.layers) {
    // pass 2: masked self-attention over the cache, after appending this
    // position's keys and values.
    matmul(buf.h, B, *l.qkv, buf.qkv);
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(l.self_kv + b * l.self_kv_stride_b + p.positions[b] * 2 * C, buf.qkv + b * 3 * C + C,
                  sizeof(float) * 2 * C);
    attend(buf.qkv, 3 * C, l.self_kv, l.self_kv_stride_b, nullptr, k_len, p.key_lengths, p, buf, l.self_probs);
    matmul(buf.attn, B, *l.self_out, buf.tmp);
    residual(buf.x, buf.tmp, l.norm2_w, l.norm2_b, p, buf);
    // pass 3: cross-attention to the encoder output (keys/values projected
    // once per decode).
    matmul(buf.h, B, *l.q, buf.q);
    attend(buf.q, C, l.cross_kv, l.cross_kv_stride_b, p.cross_rows, p.src_len, p.src_lengths, p, buf, l.cross_probs);
    matmul(buf.attn, B, *l.cross_out, buf.tmp);
    residual(buf.x, buf.tmp, l.norm3_w, l.norm3_b, p, buf);
    // pass 4: feed-forward, bias and ReLU fused after the first product
    // (in place: element-wise).
    matmul(buf.h, B, *l.ff1, buf.ff);
    ops::cpu::BiasReluDropoutParams<float, float> r{};
    r.h = buf.ff, r.bias = l.ff1_b, r.out = buf.ff, r.rows = B, r.channels = p.ff_dim, r.positions = 1;
    ops::cpu::bias_relu_dropout_forward(r);
    matmul(buf.ff, B, *l.ff2, buf.tmp);
    residual(buf.x, buf.tmp, l.next_w, l.next_b, p, buf);
  }

  // pass 5: logits from the final norm.
  matmul(buf.h, B, *p.output, p.logits);
}

}  // namespace nmt
