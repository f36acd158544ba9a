// Causality check: decoder outputs at positions <= i must not depend on the
// target tokens after i, neither in value (perturbation) nor in gradient.
#pragma once

#include <cstdint>
#include <vector>

#include "model/transformer.h"

namespace nmt {

struct CausalityRow {
  int64_t position = 0;       // i
  double max_delta = 0;       // max |Δ logits[<= i]| when tokens > i are perturbed
  double max_future_grad = 0; // max |∂ logits[i] / ∂ embedding[j > i]|
};

struct CausalityReport {
  std::vector<CausalityRow> rows;  // worst over all sentences, per position
  bool causal = true;
};

// sources/targets: token ids without specials; the decoder input is
// <start> y1..yn. `seed` drives the perturbations. Model in eval mode.
CausalityReport check_causality(Transformer& model,
                                const std::vector<std::vector<int64_t>>& sources,
                                const std::vector<std::vector<int64_t>>& targets,
                                const c10::Device& device, uint64_t seed = 0);

}  // namespace nmt
