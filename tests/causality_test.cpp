#include <gtest/gtest.h>

#include <random>

#include "checkpoint/checkpoint.h"
#include "model/build.h"
#include "model/causality.h"
#include "test_util.h"

namespace nmt {
namespace {

class Causality : public ::testing::TestWithParam<ops::AttentionBackend> {};

// An untrained tiny model: causality is structural, not learnt.
TEST_P(Causality, HoldsWithMaskAndIsDetectedWithout) {
  torch::manual_seed(0);
  Config cfg = testing::tiny_config();
  Transformer model = build_model(cfg, 60, 50);
  model->set_attention_backend(GetParam());
  std::mt19937_64 rng(3);
  std::vector<std::vector<int64_t>> src, tgt;
  for (int s = 0; s < 3; ++s) {
    std::vector<int64_t> a(4 + s * 3), b(5 + s * 4);
    for (auto& x : a) x = 4 + rng() % 56;
    for (auto& x : b) x = 4 + rng() % 46;
    src.push_back(a), tgt.push_back(b);
  }
  const CausalityReport ok = check_causality(model, src, tgt, torch::kCPU);
  EXPECT_TRUE(ok.causal);
  EXPECT_EQ(ok.rows.size(), tgt.back().size() + 1);

  model->set_disable_causal_mask(true);
  const CausalityReport leak = check_causality(model, src, tgt, torch::kCPU);
  EXPECT_FALSE(leak.causal);
  // Every position but the last sees the future once the mask is gone.
  for (size_t i = 0; i + 1 < leak.rows.size(); ++i) {
    EXPECT_GT(leak.rows[i].max_delta, 0.0) << "position " << i;
    EXPECT_GT(leak.rows[i].max_future_grad, 0.0) << "position " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Causality,
                         ::testing::Values(ops::AttentionBackend::kTorch,
                                           ops::AttentionBackend::kNaive,
                                           ops::AttentionBackend::kFlash),
                         [](const auto& info) { return ops::backend_name(info.param); });

}  // namespace
}  // namespace nmt
