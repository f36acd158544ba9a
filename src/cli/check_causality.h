// Causality check: decoder outputs at positions <= i must not depend on the
// target tokens after i, neither in value (perturbation) nor in gradient.
#pragma once

#include <string>
#include <vector>

#include "cli/commands.h"
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

namespace cli {

struct CausalityArgs {
  std::string checkpoint;
  int64_t sentences = 8;
  bool disable_causal_mask = false;
  RuntimeFlags runtime;
};
// Exit 0 when causal, 1 when leakage is found.
int run_check_causality(const CausalityArgs& args);

}  // namespace cli
}  // namespace nmt
