#include "cli/check_causality.h"

#include <torch/autograd.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "checkpoint/checkpoint.h"
#include "data/dataset.h"
#include "util/device.h"
#include "util/errors.h"

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

namespace cli {

int run_check_causality(const CausalityArgs& args) {
  c10::Device device(c10::kCPU);
  if (args.runtime.device) device = resolve_device(*args.runtime.device, "--device");
  LoadedCheckpoint ck = load_checkpoint(args.checkpoint, device);
  if (args.runtime.attention)
    ck.model->set_attention_backend(ops::parse_backend(*args.runtime.attention));
  ck.model->set_disable_causal_mask(args.disable_causal_mask);
  set_threads(args.runtime.threads.value_or(ck.cfg.train.threads));
  torch::manual_seed(0);

  // Sample sentences from the validation split the model was trained with,
  // or random token sequences when it is not at hand.
  std::vector<std::vector<int64_t>> src, tgt;
  const auto& d = ck.cfg.data;
  if (std::filesystem::exists(d.valid_src) && std::filesystem::exists(d.valid_tgt)) {
    const auto corpus = load_parallel(d.valid_src, d.valid_tgt, *ck.src_tok, *ck.tgt_tok, 0);
    for (int64_t i = 0; i < args.sentences && i < static_cast<int64_t>(corpus.src.size()); ++i)
      src.push_back(corpus.src[i]), tgt.push_back(corpus.tgt[i]);
  } else {
    std::mt19937_64 rng(1);
    for (int64_t i = 0; i < args.sentences; ++i) {
      std::vector<int64_t> s(5 + i % 7), t(6 + i % 9);
      for (auto& x : s) x = kEndId + 1 + rng() % (ck.src_tok->vocab_size() - kEndId - 1);
      for (auto& x : t) x = kEndId + 1 + rng() % (ck.tgt_tok->vocab_size() - kEndId - 1);
      src.push_back(s), tgt.push_back(t);
    }
  }
  spdlog::info("check-causality: {} sentences, attention '{}'{}", src.size(),
               ops::backend_name(ck.model->attention_backend()),
               args.disable_causal_mask ? ", causal mask DISABLED" : "");
  const CausalityReport report = check_causality(ck.model, src, tgt, device);
  std::printf("%8s  %22s  %22s\n", "position", "max |Δ| future tokens", "max |∂/∂ future|");
  for (const auto& r : report.rows)
    std::printf("%8lld  %22.3e  %22.3e\n", static_cast<long long>(r.position), r.max_delta,
                r.max_future_grad);
  std::printf("verdict: %s\n", report.causal ? "CAUSAL (future tokens have no influence)"
                                             : "LEAK (future tokens influence earlier outputs)");
  return report.causal ? kExitOk : kExitRuntime;
}

}  // namespace cli
}  // namespace nmt
