#include "runtime/encoder_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "runtime/fused_cpu_blocks.h"
#include "ops/activation/cpu/bias_relu_dropout_cpu.h"
#include "ops/embedding/cpu/embedding_cpu.h"

namespace nmt {

namespace {

// The encoder's scratch, carved out of one buffer, for up to N = B · S rows.
struct EncoderBuffers {
  float* x;      // x: [N, C], the residual stream
  float* h;      // h: [N, C], its LayerNorm
  float* qkv;    // qkv: [N, 3C]
  float* attn;   // attn: [N, C]
  float* tmp;    // tmp: [N, C]
  float* ff;     // ff: [N, F]
  float* lse;    // lse: [B, H, S]
  float* probs;  // probs: [B, H, S, S] (naive attention only)
  float* mean;   // mean, rstd: [N] (LayerNorm statistics, unused here)
  float* rstd;
};

EncoderBuffers carve(float* w, int64_t B, int64_t S, int64_t C, int64_t H, int64_t F, bool naive) {
  EncoderBuffers b{};
  const int64_t N = B * S;
  const auto take = [&w](int64_t n) { float* p = w; w += n; return p; };
  b.x = take(N * C), b.h = take(N * C), b.qkv = take(N * 3 * C), b.attn = take(N * C), b.tmp = take(N * C);
  b.ff = take(N * F), b.lse = take(B * H * S), b.probs = naive ? take(B * H * S * S) : nullptr;
  b.mean = take(N), b.rstd = take(N);
  return b;
}

// x += y, h = LayerNorm(x) with weight g and bias b; post-norm, x = h after.
// Without y (the embeddings): h = LayerNorm(x), post-norm h = x.
void residual(float* x, const float* y, const float* g, const float* b, int64_t rows, const EncoderCpuParams& p,
              const EncoderBuffers& buf) {
  fused::residual(x, y, g, b, buf.h, buf.mean, buf.rstd, rows, p.channels, p.eps, p.post_norm);
}

// Each sentence's positions attend to its own positions. The rows are
// packed, sentence after sentence (row_offset[b] is sentence b's first):
// qkv: [N, 3C] (heads D apart in each third); attn: [N, C]. record: null,
// or [H, len, len] for the probabilities of sentence 0 (B = 1, naive).
void attend(const EncoderCpuParams& p, const std::vector<int64_t>& row_offset, const EncoderBuffers& buf,
            float* record) {
  const int64_t C = p.channels, D = C / p.heads;
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t len = row_offset[b + 1] - row_offset[b];
    if (len == 0) continue;
    ops::AttentionForwardParams<float> a{};
    a.q = buf.qkv + row_offset[b] * 3 * C, a.k = a.q + C, a.v = a.q + 2 * C;
    a.o = buf.attn + row_offset[b] * C, a.lse = buf.lse, a.probs = buf.probs;
    a.key_lengths = &len;
    a.q_stride_b = a.k_stride_b = a.v_stride_b = len * 3 * C;
    a.q_stride_h = a.k_stride_h = a.v_stride_h = D;
    a.q_stride_t = a.k_stride_t = a.v_stride_t = 3 * C;
    a.o_stride_b = len * C, a.o_stride_h = D, a.o_stride_t = C;
    a.batch = 1, a.heads = p.heads, a.q_len = len, a.k_len = len, a.head_dim = D;
    a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
    a.causal = false;
    fused::attention(a, p.naive_attention);
    if (record != nullptr && b == 0) std::memcpy(record, buf.probs, sizeof(float) * p.heads * len * len);
  }
}

}  // namespace

int64_t encoder_cpu_workspace_floats(int64_t batch, int64_t length, int64_t channels, int64_t heads,
                                     int64_t ff_dim, bool naive_attention) {
  const int64_t N = batch * length;
  return N * (7 * channels + ff_dim + 2) + batch * heads * length * (1 + (naive_attention ? length : 0));
}

void encoder_cpu(const EncoderCpuParams& p) {
  const int64_t B = p.batch, S = p.length, C = p.channels;
  if (B * S == 0) return;
  const EncoderBuffers buf = carve(p.workspace, B, S, C, p.heads, p.ff_dim, p.naive_attention);
  // Only the sentences' own positions are computed, packed one sentence
  // after another: a batch of sentences of different lengths (the few that
  // join a service's running batch between two steps) would otherwise pay
  // for every padding position in every layer. Each position's result is
  // the same either way (every op but attention works row by row, and
  // attention sees only the sentence's own keys).
  std::vector<int64_t> row_offset(static_cast<size_t>(B + 1), 0);
  for (int64_t b = 0; b < B; ++b) row_offset[b + 1] = row_offset[b] + std::clamp<int64_t>(p.src_lengths[b], 0, S);
  const int64_t N = row_offset[B];

  // pass 1: x = embedding * sqrt(C) + position; h = norm1(x) of the first
  // layer (post-norm: h = x).
  for (int64_t b = 0; b < B; ++b) {
    ops::cpu::EmbeddingParams<float> e{};
    e.ids = p.tokens + b * S, e.table = p.embedding, e.positions = p.position_table, e.out = buf.x + row_offset[b] * C;
    e.batch = 1, e.length = row_offset[b + 1] - row_offset[b], e.channels = C, e.vocab = p.vocab;
    e.position_offset = 0, e.scale = p.embed_scale;
    if (e.length > 0) ops::cpu::embedding_forward(e);
  }
  residual(buf.x, nullptr, p.norm1_w, p.norm1_b, N, p, buf);

  for (size_t layer = 0; layer < p.layers.size(); ++layer) {
    const EncoderLayerCpu& l = p.layers[layer];
    // pass 2: self-attention over the sentence's own tokens, its output
    // projection, the residual add and the feed-forward block's norm.
    l.qkv->forward(buf.h, N, C, buf.qkv);
    attend(p, row_offset, buf, layer < p.self_probs.size() ? p.self_probs[layer] : nullptr);
    l.out->forward(buf.attn, N, C, buf.tmp);
    residual(buf.x, buf.tmp, l.norm2_w, l.norm2_b, N, p, buf);
    // pass 3: feed-forward, bias and ReLU fused after the first product.
    l.ff1->forward(buf.h, N, C, buf.ff);
    ops::cpu::BiasReluDropoutParams<float, float> r{};
    r.h = buf.ff, r.bias = l.ff1_b, r.out = buf.ff, r.rows = N, r.channels = p.ff_dim, r.positions = 1;
    ops::cpu::bias_relu_dropout_forward(r);
    l.ff2->forward(buf.ff, N, p.ff_dim, buf.tmp);
    residual(buf.x, buf.tmp, l.next_w, l.next_b, N, p, buf);
  }
  // pass 4: back to [B, S, C], zeros at the padding positions.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = row_offset[b + 1] - row_offset[b];
    std::memcpy(p.memory + b * S * C, buf.h + row_offset[b] * C, sizeof(float) * len * C);
    std::memset(p.memory + (b * S + len) * C, 0, sizeof(float) * (S - len) * C);
  }
}

}  // namespace nmt
