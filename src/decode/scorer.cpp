#include "decode/scorer.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>

#include "data/placeholder_mask.h"
#include "decode/decode.h"
#include "tokenizer/special_ids.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"
#include "util/interrupt.h"
#include "util/test_hooks.h"

namespace nmt {

std::vector<std::vector<double>> score_pairs(Transformer& model, const Tokenizer& src_tok,
                                             const Tokenizer& tgt_tok,
                                             const std::vector<std::string>& sources,
                                             const std::vector<std::string>& targets,
                                             const c10::Device& device, bool protect_placeholders,
                                             int64_t batch_size) {
  if (sources.size() != targets.size())
    throw InputError("score_pairs: " + std::to_string(sources.size()) + " sources but " +
                     std::to_string(targets.size()) + " targets");
  const size_t n = sources.size();
  std::vector<std::vector<int64_t>> xs(n), ys(n);
  for (size_t i = 0; i < n; ++i) {
    const auto [source, target] = data::model_pair(sources[i], targets[i], protect_placeholders);
    xs[i] = src_tok.encode(source);
    ys[i] = tgt_tok.encode(target);
  }
  // Over-long sources are cut as everywhere (fit_source), targets to what
  // the position table covers after <start>: the score is then that of the prefix.
  const size_t max_positions = static_cast<size_t>(model->options().max_positions());
  for (size_t i = 0; i < n; ++i) {
    fit_source(xs[i], model);
    if (ys[i].size() + 1 > max_positions) ys[i].resize(max_positions - 1);
  }
  // Length-sorted batches waste little on padding; padding itself is masked
  // (source and target lengths), so a pair's scores are its own.
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return xs[a].size() + ys[a].size() < xs[b].size() + ys[b].size();
  });
  std::vector<std::vector<double>> out(n);
  at::NoGradGuard no_grad;
  for (size_t start = 0; start < n; start += static_cast<size_t>(batch_size)) {
    test_hold("score-batch", /*until_signal=*/true);
    throw_if_interrupted();  // a safe point between batches: nothing half-done
    const size_t end = std::min(n, start + static_cast<size_t>(batch_size));
    const int64_t b = static_cast<int64_t>(end - start);
    int64_t s = 1, t = 1;
    for (size_t k = start; k < end; ++k) {
      s = std::max<int64_t>(s, static_cast<int64_t>(xs[order[k]].size()));
      t = std::max<int64_t>(t, static_cast<int64_t>(ys[order[k]].size()) + 1);
    }
    // src: [B, S]; tgt_in: <start> y1 .. yn, [B, T]; labels: y1 .. yn <end>
    std::vector<int64_t> src(static_cast<size_t>(b * s), kPadId), tgt_in(static_cast<size_t>(b * t), kPadId);
    std::vector<int64_t> src_len(static_cast<size_t>(b)), tgt_len(static_cast<size_t>(b));
    for (int64_t r = 0; r < b; ++r) {
      const auto& x = xs[order[start + static_cast<size_t>(r)]];
      const auto& y = ys[order[start + static_cast<size_t>(r)]];
      std::copy(x.begin(), x.end(), src.begin() + r * s);
      tgt_in[static_cast<size_t>(r * t)] = kStartId;
      std::copy(y.begin(), y.end(), tgt_in.begin() + r * t + 1);
      // An empty source still needs one key to attend to: <end> stands in,
      // as decoding does for an empty line.
      src_len[static_cast<size_t>(r)] = std::max<int64_t>(1, static_cast<int64_t>(x.size()));
      if (x.empty()) src[static_cast<size_t>(r * s)] = kEndId;
      tgt_len[static_cast<size_t>(r)] = static_cast<int64_t>(y.size()) + 1;
    }
    auto ids = [&](std::vector<int64_t>& v, int64_t cols) {
      return at::tensor(v, at::kLong).view({b, cols}).to(device);
    };
    const at::Tensor logits = model->forward(ids(src, s), at::tensor(src_len, at::kLong).to(device),
                                             ids(tgt_in, t), at::tensor(tgt_len, at::kLong).to(device));
    const at::Tensor logp = at::log_softmax(logits.to(at::kDouble), -1).cpu();  // [B, T, V]
    const auto acc = logp.accessor<double, 3>();
    for (int64_t r = 0; r < b; ++r) {
      const size_t i = order[start + static_cast<size_t>(r)];
      const auto& y = ys[i];
      std::vector<double>& row = out[i];
      for (size_t k = 0; k <= y.size(); ++k)
        row.push_back(acc[r][static_cast<int64_t>(k)][k < y.size() ? y[k] : kEndId]);
    }
  }
  return out;
}

double mean_logprob(const std::vector<double>& token_logprobs) {
  if (token_logprobs.empty()) return 0.0;
  return std::accumulate(token_logprobs.begin(), token_logprobs.end(), 0.0) /
         static_cast<double>(token_logprobs.size());
}

}  // namespace nmt
