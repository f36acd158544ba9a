#include "decode/translator.h"

#include <algorithm>
#include <numeric>

#include "data/dataset.h"
#include "tokenizer/tokenizer.h"

namespace nmt {

std::vector<std::vector<int64_t>> greedy_decode(Transformer& model,
                                                const std::vector<std::vector<int64_t>>& sources,
                                                int64_t max_len, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(sources.size());
  std::vector<std::vector<int64_t>> out(n);
  if (n == 0) return out;
  auto [src, src_len] = make_source_batch(sources);
  src = src.to(device), src_len = src_len.to(device);
  const torch::Tensor memory = model->encode(src, src_len);  // [B, S, C]

  // ys: [B, t] = <start> y1 .. y(t-1); rows that ended keep being fed <pad>
  // but their tokens are ignored.
  torch::Tensor ys = torch::full({n, 1}, kStartId, torch::TensorOptions(torch::kLong).device(device));
  std::vector<bool> done(n, false);
  int64_t remaining = n;
  const int64_t limit = std::min(max_len, model->options().max_positions() - 1);
  for (int64_t step = 0; step < limit && remaining > 0; ++step) {
    // Full recomputation of the prefix; causality makes row t independent of later rows.
    const torch::Tensor lengths = torch::full({n}, ys.size(1), src_len.options());
    const torch::Tensor logits =
        model->decode_embedded(model->embed_target(ys), memory, lengths, src_len);  // [B, t, V]
    const torch::Tensor next = logits.select(1, ys.size(1) - 1).argmax(-1);      // [B]
    const torch::Tensor next_cpu = next.to(torch::kCPU);
    const int64_t* next_ids = next_cpu.data_ptr<int64_t>();
    for (int64_t b = 0; b < n; ++b) {
      if (done[b]) continue;
      if (next_ids[b] == kEndId) {
        done[b] = true;
        --remaining;
      } else {
        out[b].push_back(next_ids[b]);
      }
    }
    ys = torch::cat({ys, next.unsqueeze(1)}, 1);
  }
  return out;
}

std::vector<std::string> translate_lines(Transformer& model, const Tokenizer& src_tok,
                                         const Tokenizer& tgt_tok,
                                         const std::vector<std::string>& lines, int64_t batch_size,
                                         int64_t max_len, const c10::Device& device) {
  std::vector<std::string> result(lines.size());
  std::vector<std::vector<int64_t>> encoded(lines.size());
  std::vector<size_t> order;
  for (size_t i = 0; i < lines.size(); ++i) {
    encoded[i] = src_tok.encode(lines[i]);
    // Clip over-long input to what the position table covers.
    if (static_cast<int64_t>(encoded[i].size()) > model->options().max_positions())
      encoded[i].resize(model->options().max_positions());
    if (!encoded[i].empty()) order.push_back(i);
  }
  // Similar lengths together: less padding, same results (padding is masked).
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return encoded[a].size() < encoded[b].size(); });
  for (size_t start = 0; start < order.size(); start += batch_size) {
    const size_t end = std::min(order.size(), start + static_cast<size_t>(batch_size));
    std::vector<std::vector<int64_t>> batch;
    for (size_t k = start; k < end; ++k) batch.push_back(encoded[order[k]]);
    const auto hyps = greedy_decode(model, batch, max_len, device);
    for (size_t k = start; k < end; ++k) result[order[k]] = tgt_tok.decode(hyps[k - start]);
  }
  return result;
}

static std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

double exact_match(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  if (refs.empty()) return 0.0;
  int64_t hits = 0;
  for (size_t i = 0; i < refs.size() && i < hyps.size(); ++i) hits += trim(hyps[i]) == trim(refs[i]);
  return static_cast<double>(hits) / static_cast<double>(refs.size());
}

}  // namespace nmt
