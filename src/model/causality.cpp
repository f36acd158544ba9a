#include "model/causality.h"

#include <torch/autograd.h>

#include <random>

#include "data/dataset.h"

namespace nmt {

CausalityReport check_causality(Transformer& model,
                                const std::vector<std::vector<int64_t>>& sources,
                                const std::vector<std::vector<int64_t>>& targets,
                                const c10::Device& device, uint64_t seed) {
  model->eval();
  std::mt19937_64 rng(seed);
  const int64_t vocab = model->options().tgt_vocab();
  std::uniform_int_distribution<int64_t> token(kEndId + 1, vocab - 1);
  CausalityReport report;
  const auto opts = torch::TensorOptions(torch::kLong).device(device);

  for (size_t s = 0; s < sources.size(); ++s) {
    std::vector<int64_t> in{kStartId};
    in.insert(in.end(), targets[s].begin(), targets[s].end());
    const int64_t t_len = static_cast<int64_t>(in.size());
    if (static_cast<int64_t>(report.rows.size()) < t_len) {
      for (int64_t i = report.rows.size(); i < t_len; ++i) report.rows.push_back({i, 0, 0});
    }
    auto [src, src_len] = make_source_batch({sources[s]});
    src = src.to(device), src_len = src_len.to(device);
    const torch::Tensor tgt_len = torch::full({1}, t_len, opts);
    torch::Tensor memory;
    torch::Tensor base;
    {
      torch::NoGradGuard no_grad;
      memory = model->encode(src, src_len);
      base = model->decode_embedded(model->embed_target(torch::tensor(in, opts).unsqueeze(0)),
                                    memory, tgt_len, src_len);  // [1, T, V]
    }

    // Values: replace every token after i by another token; rows <= i must not move.
    for (int64_t i = 0; i + 1 < t_len; ++i) {
      std::vector<int64_t> perturbed = in;
      for (int64_t j = i + 1; j < t_len; ++j) {
        int64_t x = token(rng);
        if (x == perturbed[j]) x = x + 1 < vocab ? x + 1 : kEndId + 1;
        perturbed[j] = x;
      }
      torch::NoGradGuard no_grad;
      const torch::Tensor logits = model->decode_embedded(
          model->embed_target(torch::tensor(perturbed, opts).unsqueeze(0)), memory, tgt_len,
          src_len);
      const double delta =
          (logits.narrow(1, 0, i + 1) - base.narrow(1, 0, i + 1)).abs().max().item<double>();
      report.rows[i].max_delta = std::max(report.rows[i].max_delta, delta);
    }

    // Gradients: d(random projection of logits[i]) / d(embedding[j]) for j > i.
    const torch::Tensor y =
        model->embed_target(torch::tensor(in, opts).unsqueeze(0)).detach().requires_grad_(true);
    const torch::Tensor logits = model->decode_embedded(y, memory.detach(), tgt_len, src_len);
    const torch::Tensor weights = torch::randn({vocab}, logits.options());
    for (int64_t i = 0; i + 1 < t_len; ++i) {
      const torch::Tensor out = (logits.select(1, i) * weights).sum();
      const torch::Tensor grad = torch::autograd::grad({out}, {y}, {}, /*retain_graph=*/true)[0];
      const double g = grad.narrow(1, i + 1, t_len - i - 1).abs().max().item<double>();
      report.rows[i].max_future_grad = std::max(report.rows[i].max_future_grad, g);
    }
  }
  // Exactly zero is the claim: masked scores are -inf, so future tokens get
  // weight 0, and every other sublayer (residual, LayerNorm, FF) is per-row.
  for (const auto& r : report.rows)
    if (r.max_delta != 0.0 || r.max_future_grad != 0.0) report.causal = false;
  return report;
}

}  // namespace nmt
