// The Transformer (model/): shapes through encoder, decoder and cross
// attention, padding that changes nothing, and a tiny model that learns.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <tuple>

#include "data/dataset.h"
#include "support/runtime_models.h"
#include "model/build.h"
#include "model/parameter_table.h"
#include "model/transformer.h"
#include "support/seams.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"
#include "train/loss.h"
#include "util/errors.h"

namespace nmt {
namespace {

Transformer tiny_model(int64_t src_vocab = 50, int64_t tgt_vocab = 40) {
  torch::manual_seed(0);
  return build_model(testing::tiny_config(), src_vocab, tgt_vocab);
}

// The parameter table names every parameter once, by the name the module
// (and so the checkpoint) uses, with the tensor itself; untied, tied and
// tie_all output projections and embeddings; and each (stack, layer, role,
// part) is one entry's, its first use or a tied one.
TEST(ParameterTable, NamesEveryParameterOnce) {
  enum Tie { kUntied, kTied, kTieAll };
  for (const Tie tie : {kUntied, kTied, kTieAll}) {
    SCOPED_TRACE(tie == kUntied ? "untied" : tie == kTied ? "tied" : "tie_all");
    torch::manual_seed(0);
    Config cfg = testing::tiny_config();
    cfg.model.tie_embeddings = tie != kUntied;
    cfg.model.tie_all = tie == kTieAll;
    const Transformer m = build_model(cfg, 50, tie == kTieAll ? 50 : 40);
    const std::vector<ParamEntry> table = parameter_table(*m);
    const auto named = m->named_parameters();
    ASSERT_EQ(table.size(), named.size());
    std::set<std::tuple<int, int64_t, int, int>> keys;
    for (size_t i = 0; i < table.size(); ++i) {
      const ParamEntry& e = table[i];
      EXPECT_EQ(e.name, named[i].key());
      EXPECT_TRUE(e.tensor.is_same(named[i].value())) << e.name;
      std::vector<ParamUse> uses{{e.stack, e.layer, e.role}};
      uses.insert(uses.end(), e.tied.begin(), e.tied.end());
      for (const ParamUse& u : uses) {
        EXPECT_TRUE(keys.insert({static_cast<int>(u.stack), u.layer, static_cast<int>(u.role),
                                 static_cast<int>(e.part)}).second)
            << e.name << " has the place of another entry";
        EXPECT_EQ(find_param(table, u.stack, u.layer, u.role, e.part), &e);
      }
      if (is_dense(e.role) && e.part == ParamPart::kWeight) EXPECT_EQ(e.tensor.dim(), 2) << e.name;
    }
    const auto name_of = [&](ParamStack stack, ParamRole role, ParamPart part = ParamPart::kWeight) {
      const ParamEntry* e = find_param(table, stack, -1, role, part);
      return e ? e->name : std::string("(none)");
    };
    const std::string src = tie == kTieAll ? "shared_embed.weight" : "src_embed.weight";
    const std::string tgt = tie == kTieAll ? "shared_embed.weight" : "tgt_embed.weight";
    EXPECT_EQ(name_of(ParamStack::kEncoder, ParamRole::kEmbedding), src);
    EXPECT_EQ(name_of(ParamStack::kDecoder, ParamRole::kEmbedding), tgt);
    EXPECT_EQ(name_of(ParamStack::kOutput, ParamRole::kOutProj), tie == kUntied ? "out_proj_weight" : tgt);
    EXPECT_EQ(name_of(ParamStack::kOutput, ParamRole::kOutProj, ParamPart::kBias),
              tie == kUntied ? "out_proj_bias" : "(none)");
    const ParamEntry* kv = find_param(table, ParamStack::kDecoder, 1, ParamRole::kCrossKv, ParamPart::kWeight);
    ASSERT_NE(kv, nullptr);
    EXPECT_EQ(kv->name, "decoder_layers.1.cross_attn.kv.weight");
    EXPECT_EQ(kv->tensor.size(1), 2 * cfg.model.d_model);
  }
}

// model.tie_all: the source embedding, the target embedding and the output
// projection are one parameter, counted once, whose gradient is the sum of
// what its three uses give. The same weights as three separate tensors (and
// a zero output bias) compute the same loss, and each of their gradients
// is part of the tied one.
TEST(Model, TieAllIsOneMatrixWithTheGradientOfItsThreeUses) {
  constexpr int64_t kVocab = 45;
  Config cfg = testing::tiny_config();
  cfg.tokenizer.shared = true;
  cfg.model.tie_all = true;
  torch::manual_seed(0);
  Transformer tied = build_model(cfg, kVocab, kVocab);
  cfg.model.tie_all = false;
  Transformer one_tie = build_model(cfg, kVocab, kVocab);
  cfg.model.tie_embeddings = false;
  Transformer untied = build_model(cfg, kVocab, kVocab);
  const int64_t c = cfg.model.d_model;
  EXPECT_TRUE(tied->src_embed->weight.is_same(tied->tgt_embed->weight));
  EXPECT_EQ(parameter_count(*tied), parameter_count(*one_tie) - kVocab * c);
  EXPECT_EQ(parameter_count(*tied), parameter_count(*untied) - 2 * kVocab * c - kVocab);
  const auto names = tied->named_parameters();
  EXPECT_TRUE(names.contains("shared_embed.weight"));
  EXPECT_FALSE(names.contains("src_embed.weight") || names.contains("tgt_embed.weight"));

  // The untied model with the tied one's weights: the one matrix three times.
  const at::Tensor shared = tied->src_embed->weight;
  {
    torch::NoGradGuard no_grad;
    for (auto& p : untied->named_parameters())
      if (names.contains(p.key())) p.value().copy_(names[p.key()]);
    untied->src_embed->weight.copy_(shared);
    untied->tgt_embed->weight.copy_(shared);
    untied->out_proj_weight.copy_(shared);
    untied->out_proj_bias.zero_();
  }
  ParallelCorpus corpus;
  torch::manual_seed(1);
  for (int i = 0; i < 6; ++i) {
    const auto ids = [&](int64_t n) {
      const at::Tensor t = torch::randint(4, kVocab, {n}, torch::kLong);
      return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + n);
    };
    corpus.src.push_back(ids(3 + i));
    corpus.tgt.push_back(ids(8 - i));
  }
  const Batch b = make_batch(corpus, {0, 1, 2, 3, 4, 5});
  tied->train(), untied->train();
  const at::Tensor loss_tied = token_loss_sum(tied, b, 0.1), loss_untied = token_loss_sum(untied, b, 0.1);
  EXPECT_NEAR(loss_tied.item<double>(), loss_untied.item<double>(), 1e-4);
  loss_tied.backward();
  loss_untied.backward();
  const at::Tensor parts[] = {untied->src_embed->weight.grad(), untied->tgt_embed->weight.grad(),
                              untied->out_proj_weight.grad()};
  for (const at::Tensor& g : parts) EXPECT_GT(g.abs().sum().item<double>(), 1e-3) << "a use without gradient";
  const at::Tensor sum = parts[0] + parts[1] + parts[2];
  EXPECT_LT((shared.grad() - sum).abs().max().item<double>(), 1e-5)
      << "largest gradient " << sum.abs().max().item<double>();
  // ... and it is not one or two of them alone.
  EXPECT_GT((shared.grad() - parts[1] - parts[2]).abs().max().item<double>(), 1e-4);
  EXPECT_GT((shared.grad() - parts[0] - parts[2]).abs().max().item<double>(), 1e-4);
}

// On the CPU the attention output projections and the second feed-forward
// product leave their biases to the residual add after them
// (ops::add_layer_norm adds them and sums their gradients): the model's
// gradient of each such bias, and of the weights beside it, against
// central differences of the loss, in float64.
TEST(Model, BiasesAddedInTheResidualGetTheLossGradient) {
  Transformer m = tiny_model();
  m->to(torch::kDouble);
  m->train();  // tiny_config's dropout is 0: a deterministic loss
  torch::manual_seed(3);
  const auto src = torch::randint(4, 50, {2, 6}, torch::kLong), tgt = torch::randint(4, 40, {2, 5}, torch::kLong);
  const auto len = torch::tensor({6, 4}, torch::kLong), tlen = torch::tensor({5, 3}, torch::kLong);
  const at::Tensor weights = torch::randn({2, 5, 40}, torch::kDouble);
  const auto loss = [&] { return (m->forward(src, len, tgt, tlen) * weights).sum(); };
  const auto named = m->named_parameters();
  const std::vector<std::string> checked = {
      "encoder_layers.0.self_attn.out.bias", "encoder_layers.0.ff2.bias",   "decoder_layers.0.self_attn.out.bias",
      "decoder_layers.0.cross_attn.out.bias", "decoder_layers.0.ff2.bias", "decoder_layers.0.ff2.weight"};
  for (const std::string& n : checked) ASSERT_TRUE(named.contains(n)) << n;
  loss().backward();
  for (const std::string& n : checked) {
    at::Tensor p = named[n];
    ASSERT_TRUE(p.grad().defined()) << n << ": no gradient";
    const at::Tensor flat = p.view({-1}), grad = p.grad().view({-1});
    for (const int64_t i : {int64_t{0}, flat.numel() - 1}) {
      constexpr double kStep = 1e-5;
      double up = 0, down = 0;
      {
        torch::NoGradGuard no_grad;
        const double v = flat[i].item<double>();
        flat[i].fill_(v + kStep);
        up = loss().item<double>();
        flat[i].fill_(v - kStep);
        down = loss().item<double>();
        flat[i].fill_(v);
      }
      const double numeric = (up - down) / (2 * kStep), analytic = grad[i].item<double>();
      EXPECT_NEAR(analytic, numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << n << "[" << i << "]";
    }
  }
}

TEST(Model, ShapesForEncoderDecoderAndCrossAttention) {
  Transformer m = tiny_model();
  m->eval();
  const auto src = torch::randint(4, 50, {3, 7}, torch::kLong);
  const auto src_len = torch::tensor({7, 5, 1}, torch::kLong);
  const auto tgt = torch::randint(4, 40, {3, 4}, torch::kLong);  // Tq=4 != Tk=7
  const auto tgt_len = torch::tensor({4, 2, 3}, torch::kLong);
  const auto memory = m->encode(src, src_len);
  EXPECT_EQ(memory.sizes(), (std::vector<int64_t>{3, 7, 32}));
  const auto logits = m->decode_embedded(m->embed_target(tgt), memory, tgt_len, src_len);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 4, 40}));
  EXPECT_TRUE(torch::isfinite(logits).all().item<bool>());

  auto& layer = *m->decoder_layers->ptr<DecoderLayerImpl>(0);
  const auto y = torch::randn({3, 4, 32});
  const auto kv = layer.cross_attn->project_memory(memory);  // [B, S, 2C]
  EXPECT_EQ(kv.sizes(), (std::vector<int64_t>{3, 7, 64}));
  const auto cross = layer.cross_attn(y, kv, src_len, ModelRuntime{});
  EXPECT_EQ(cross.sizes(), (std::vector<int64_t>{3, 4, 32}));
  const auto p = layer.cross_attn->probs(y, kv, src_len);
  EXPECT_EQ(p.sizes(), (std::vector<int64_t>{3, 4, 4, 7}));
  // Padded source keys get no weight; rows sum to one.
  EXPECT_EQ(p[2].narrow(-1, 1, 6).abs().max().item<float>(), 0.0f);
  EXPECT_NEAR(p.sum(-1).sub(1).abs().max().item<float>(), 0.0f, 1e-5);
}

// The explorer's maps: one per layer and kind, rows that sum to one over the
// visible keys, padding and (decoder) future positions at zero, and the same
// maps for a sentence alone or padded in a batch.
TEST(Model, AttentionMapsOfEveryKind) {
  Transformer m = tiny_model();
  m->eval();
  const auto src = torch::randint(4, 50, {2, 6}, torch::kLong);
  const auto src_len = torch::tensor({6, 4}, torch::kLong);
  const auto tgt = torch::randint(4, 40, {2, 5}, torch::kLong);
  const auto tgt_len = torch::tensor({5, 3}, torch::kLong);
  const AttentionMaps maps = m->attention_maps(src, src_len, tgt, tgt_len);
  ASSERT_EQ(maps.encoder_self.size(), 2u);
  ASSERT_EQ(maps.decoder_self.size(), 2u);
  ASSERT_EQ(maps.cross.size(), 2u);
  for (int l = 0; l < 2; ++l) {
    EXPECT_EQ(maps.encoder_self[l].sizes(), (std::vector<int64_t>{2, 4, 6, 6}));
    EXPECT_EQ(maps.decoder_self[l].sizes(), (std::vector<int64_t>{2, 4, 5, 5}));
    EXPECT_EQ(maps.cross[l].sizes(), (std::vector<int64_t>{2, 4, 5, 6}));
    for (const auto* t : {&maps.encoder_self[l], &maps.decoder_self[l], &maps.cross[l]})
      EXPECT_NEAR((*t)[0].sum(-1).sub(1).abs().max().item<float>(), 0.0f, 1e-5);
    // The decoder's future is invisible: the upper triangle is exactly zero.
    EXPECT_EQ(maps.decoder_self[l].triu(1).abs().max().item<float>(), 0.0f);
    EXPECT_GT(maps.decoder_self[l][0].diagonal(0, -2, -1).min().item<float>(), 0.0f);
    // Row 1's padding: source keys past 4 and target keys past 3 get nothing.
    EXPECT_EQ(maps.encoder_self[l][1].narrow(-1, 4, 2).abs().max().item<float>(), 0.0f);
    EXPECT_EQ(maps.cross[l][1].narrow(-1, 4, 2).abs().max().item<float>(), 0.0f);
    EXPECT_EQ(maps.decoder_self[l][1].narrow(-1, 3, 2).abs().max().item<float>(), 0.0f);
  }
  // Sentence 1 alone, unpadded: the same maps over its real positions.
  const AttentionMaps alone = m->attention_maps(src.narrow(0, 1, 1).narrow(1, 0, 4), src_len.narrow(0, 1, 1),
                                                tgt.narrow(0, 1, 1).narrow(1, 0, 3), tgt_len.narrow(0, 1, 1));
  for (int l = 0; l < 2; ++l) {
    EXPECT_LT((alone.encoder_self[l][0] - maps.encoder_self[l][1].narrow(1, 0, 4).narrow(2, 0, 4)).abs().max().item<float>(), 1e-5);
    EXPECT_LT((alone.decoder_self[l][0] - maps.decoder_self[l][1].narrow(1, 0, 3).narrow(2, 0, 3)).abs().max().item<float>(), 1e-5);
    EXPECT_LT((alone.cross[l][0] - maps.cross[l][1].narrow(1, 0, 3).narrow(2, 0, 4)).abs().max().item<float>(), 1e-5);
  }
  // Without the causal mask the maps show the leak check-causality looks for.
  m->set_disable_causal_mask(true);
  EXPECT_GT(m->attention_maps(src, src_len, tgt, tgt_len).decoder_self[0].triu(1).sum().item<float>(), 0.1f);
}

// Positions past a row's length are masked on both sides: whatever tokens
// stand there (not only <pad>), the real positions' outputs do not move.
TEST(Model, PaddingDoesNotChangeOutputs) {
  Transformer m = tiny_model();
  m->eval();
  const auto src = torch::randint(4, 50, {1, 5}, torch::kLong);
  const auto tgt = torch::randint(4, 40, {1, 3}, torch::kLong);
  const auto len = torch::tensor({5}, torch::kLong);
  const auto tlen = torch::tensor({3}, torch::kLong);
  const auto src_padded = torch::cat({src, torch::randint(0, 50, {1, 4}, torch::kLong)}, 1);
  const auto tgt_padded = torch::cat({tgt, torch::randint(0, 40, {1, 6}, torch::kLong)}, 1);
  const auto a = m->forward(src, len, tgt, tlen);                // [1, 3, V]
  const auto b = m->forward(src_padded, len, tgt_padded, tlen);  // [1, 9, V]
  EXPECT_LT((a - b.narrow(1, 0, 3)).abs().max().item<float>(), 1e-5);
  // Without the causal mask the target lengths alone must hide the padding.
  m->set_disable_causal_mask(true);
  const auto c = m->forward(src, len, tgt, tlen);
  const auto d = m->forward(src_padded, len, tgt_padded, tlen);
  EXPECT_LT((c - d.narrow(1, 0, 3)).abs().max().item<float>(), 1e-5);
}

// model.activation_dropout: the feed-forward block's own rate after its
// ReLU (-1: model.dropout's), in training only.
TEST(Model, ActivationDropoutIsTheFeedForwardsOwnRate) {
  const auto src = torch::randint(4, 50, {2, 6}, torch::kLong), tgt = torch::randint(4, 40, {2, 5}, torch::kLong);
  const auto len = torch::tensor({6, 4}, torch::kLong), tlen = torch::tensor({5, 3}, torch::kLong);
  const auto run = [&](double dropout, double activation_dropout, bool training) {
    Config cfg = testing::tiny_config();
    cfg.model.dropout = dropout, cfg.model.activation_dropout = activation_dropout;
    torch::manual_seed(0);
    Transformer m = build_model(cfg, 50, 40);
    training ? m->train() : m->eval();
    m->set_dropout_step(1, 3, 0);
    torch::NoGradGuard no_grad;
    return m->forward(src, len, tgt, tlen);
  };
  const auto none = run(0.0, 0.0, true);
  EXPECT_FALSE(torch::allclose(run(0.0, 0.5, true), none));  // the FF's dropout alone
  EXPECT_TRUE(torch::equal(run(0.3, 0.0, true), run(0.3, 0.0, true)));
  EXPECT_FALSE(torch::allclose(run(0.3, 0.0, true), run(0.3, -1, true)));  // -1 follows dropout
  EXPECT_TRUE(torch::equal(run(0.3, -1, true), run(0.3, 0.3, true)));
  EXPECT_TRUE(torch::equal(run(0.0, 0.5, false), run(0.0, 0.0, false)));  // evaluation: none
  EXPECT_THROW(parse_config("model: {activation_dropout: -0.5}\n", "t.yaml"), InputError);
  EXPECT_NO_THROW(parse_config("model: {activation_dropout: -1}\n", "t.yaml"));
}

// model.attention_dropout: on the attention probabilities of every
// self- and cross-attention, in training only; the three backends drop the
// same elements, so the model's loss and gradients agree across them (the
// op-level checks are in attention_test.cpp); a rate of 0 changes nothing.
TEST(Model, AttentionDropoutIsTheSameInEveryBackend) {
  const auto src = torch::randint(4, 50, {3, 7}, torch::kLong), tgt = torch::randint(4, 40, {3, 6}, torch::kLong);
  const auto len = torch::tensor({7, 4, 1}, torch::kLong), tlen = torch::tensor({6, 2, 5}, torch::kLong);
  const auto labels = torch::randint(4, 40, {3, 6}, torch::kLong);
  struct Result {
    at::Tensor loss, grad;  // the loss, and the first encoder layer's qkv weight gradient
  };
  const auto run = [&](double attention_dropout, ops::AttentionBackend backend, bool training) {
    Config cfg = testing::tiny_config();
    cfg.model.dropout = 0, cfg.model.activation_dropout = 0, cfg.model.attention_dropout = attention_dropout;
    torch::manual_seed(0);
    Transformer m = build_model(cfg, 50, 40);
    m->to(torch::kDouble);
    m->set_attention_backend(backend);
    training ? m->train() : m->eval();
    m->set_dropout_step(5, 9, 2);
    const at::Tensor loss = m->loss_sum(src, len, tgt, tlen, labels, 0.1);
    loss.backward();
    return Result{loss.detach(), m->encoder_layers->ptr<EncoderLayerImpl>(0)->self_attn->qkv->weight.grad().clone()};
  };
  const Result none = run(0.0, ops::AttentionBackend::kFlash, true);
  const Result torch_ref = run(0.4, ops::AttentionBackend::kTorch, true);
  EXPECT_GT(std::abs(torch_ref.loss.item<double>() - none.loss.item<double>()), 1e-3);
  for (const auto backend : {ops::AttentionBackend::kNaive, ops::AttentionBackend::kFlash}) {
    const Result r = run(0.4, backend, true);
    EXPECT_NEAR(r.loss.item<double>(), torch_ref.loss.item<double>(), 1e-9) << ops::backend_name(backend);
    EXPECT_LT((r.grad - torch_ref.grad).abs().max().item<double>(), 1e-9) << ops::backend_name(backend);
  }
  EXPECT_TRUE(torch::equal(run(0.4, ops::AttentionBackend::kFlash, false).loss,
                           run(0.0, ops::AttentionBackend::kFlash, false).loss));  // evaluation: none
  EXPECT_THROW(parse_config("model: {attention_dropout: 0.95}\n", "t.yaml"), InputError);
}

// Training's encoder on its sentences' own rows (no padding rows in any
// product, norm or activation; flash attention on packed sentences) against
// the same model on padded rows: the loss and every parameter's gradient, in
// float64 and float32, without dropout, with attention dropout alone and with
// dropout everywhere (every mask drawn where the padded rows draw it).
TEST(Model, EncoderOnSentenceRowsMatchesPaddedRows) {
  const auto src = torch::randint(4, 50, {3, 9}, torch::kLong), tgt = torch::randint(4, 40, {3, 6}, torch::kLong);
  const auto len = torch::tensor({9, 4, 1}, torch::kLong), tlen = torch::tensor({6, 2, 5}, torch::kLong);
  const auto labels = torch::randint(4, 40, {3, 6}, torch::kLong);
  struct Result {
    double loss;
    std::vector<at::Tensor> grads;
  };
  const auto run = [&](at::ScalarType dtype, double dropout, double attention_dropout, bool packed) {
    Config cfg = testing::tiny_config();
    cfg.model.dropout = dropout, cfg.model.activation_dropout = -1, cfg.model.attention_dropout = attention_dropout;
    torch::manual_seed(0);
    Transformer m = build_model(cfg, 50, 40);
    m->to(dtype);
    m->set_attention_backend(ops::AttentionBackend::kFlash);
    m->train();
    m->set_dropout_step(5, 9, 2);
    TransformerTestSeam::set_packed_encoder(m, packed);
    EXPECT_EQ(TransformerTestSeam::packed_encoder_applies(m, src), packed);
    const at::Tensor loss = m->loss_sum(src, len, tgt, tlen, labels, 0.1);
    loss.backward();
    Result r{loss.item<double>(), {}};
    for (const at::Tensor& p : m->parameters()) r.grads.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
    return r;
  };
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    for (const auto& [dropout, attention_dropout] : {std::pair{0.0, 0.0}, {0.0, 0.3}, {0.2, 0.3}}) {
      const Result packed = run(dtype, dropout, attention_dropout, true),
                   padded = run(dtype, dropout, attention_dropout, false);
      const double tol = dtype == at::kDouble ? 1e-11 : 2e-5;
      const std::string what = std::string(c10::toString(dtype)) + " dropout " + std::to_string(dropout) +
                               " attention dropout " + std::to_string(attention_dropout);
      EXPECT_NEAR(packed.loss, padded.loss, tol * std::abs(padded.loss)) << what;
      ASSERT_EQ(packed.grads.size(), padded.grads.size());
      for (size_t i = 0; i < packed.grads.size(); ++i) {
        ASSERT_EQ(packed.grads[i].defined(), padded.grads[i].defined()) << what << " parameter " << i;
        if (!padded.grads[i].defined()) continue;
        const double scale = std::max(padded.grads[i].abs().max().item<double>(), 1e-3);
        EXPECT_LE((packed.grads[i] - padded.grads[i]).abs().max().item<double>(), tol * scale)
            << what << " parameter " << i;
      }
    }
  }
  // Dropout makes a difference at all (the comparison above is not blind to it).
  EXPECT_GT(std::abs(run(at::kDouble, 0.2, 0.3, true).loss - run(at::kDouble, 0.0, 0.3, true).loss), 1e-3);
  // Packed sentences are flash's on the CPU: the other backends keep the padded rows.
  Config cfg = testing::tiny_config();
  Transformer m = build_model(cfg, 50, 40);
  for (const auto backend : {ops::AttentionBackend::kNaive, ops::AttentionBackend::kTorch}) {
    m->set_attention_backend(backend);
    EXPECT_FALSE(TransformerTestSeam::packed_encoder_applies(m, src)) << ops::backend_name(backend);
  }
}

// model.norm: post with bf16 matrix multiplies (precision bf16 or auto on
// a CPU with AVX512-BF16): the sublayers' bf16 outputs join the float32
// stream before each LayerNorm; the loss and its gradient stay within bf16's
// reach of float32's. The gradient is compared whole (every parameter's, as
// one vector, by its L2 norm): one small tensor's largest element moved by
// 1.3-13% of its largest magnitude from one draw of the batch to another
// (60 draws, LibTorch's bf16 products on an AVX2-only CPU), the whole
// gradient by 2.2-5.3%, the loss by under 0.2%.
TEST(Model, PostNormTrainsWithBf16MatrixMultiplies) {
  torch::manual_seed(1);
  const auto src = torch::randint(4, 50, {3, 7}, torch::kLong), tgt = torch::randint(4, 40, {3, 6}, torch::kLong);
  const auto len = torch::tensor({7, 4, 2}, torch::kLong), tlen = torch::tensor({6, 2, 5}, torch::kLong);
  const auto labels = torch::randint(4, 40, {3, 6}, torch::kLong);
  const auto run = [&](at::ScalarType matmul) {
    Config cfg = testing::tiny_config();
    cfg.model.norm = "post";
    torch::manual_seed(0);
    Transformer m = build_model(cfg, 50, 40);
    m->set_matmul_dtype(matmul);
    m->train();
    m->set_dropout_step(1, 2, 0);
    const at::Tensor loss = m->loss_sum(src, len, tgt, tlen, labels, 0.1);
    loss.backward();
    std::vector<at::Tensor> grads;
    for (const at::Tensor& p : m->parameters()) {
      EXPECT_TRUE(p.grad().defined());
      if (p.grad().defined()) grads.push_back(p.grad().to(at::kDouble).flatten());
    }
    return std::pair{loss.item<double>(), at::cat(grads)};
  };
  const auto [loss32, grad32] = run(at::kFloat);
  const auto [loss16, grad16] = run(at::kBFloat16);
  EXPECT_NEAR(loss16, loss32, 5e-3 * std::abs(loss32));
  EXPECT_LT((grad16 - grad32).norm().item<double>(), 0.1 * grad32.norm().item<double>());
}

// ~20 pairs of the toy corpus, learnt by heart by a tiny model.
TEST(Model, TinyModelMemorizesTwentyPairs) {
  const auto& paths = testing::toy_tokenizers();
  const Tokenizer zh(paths.src_model), en(paths.tgt_model);
  ParallelCorpus all = load_parallel(testing::toy("valid.zh"), testing::toy("valid.en"), zh, en, 64);
  ParallelCorpus c;
  for (int i = 0; i < 20; ++i) {
    c.src.push_back(all.src[i]), c.tgt.push_back(all.tgt[i]);
    c.src_text.push_back(all.src_text[i]), c.tgt_text.push_back(all.tgt_text[i]);
  }
  Config cfg = testing::tiny_config();
  cfg.model.d_model = 64;
  cfg.model.ff_dim = 128;
  torch::manual_seed(0);
  Transformer m = build_model(cfg, zh.vocab_size(), en.vocab_size());
  std::vector<int64_t> idx(20);
  std::iota(idx.begin(), idx.end(), 0);
  testing::train_steps(m, make_batch(c, idx), 300, 3e-3);
  m->eval();
  DecodeOptions greedy;
  greedy.max_len = 40;
  const auto hyps = testing::search_all(*testing::cpu_model(m), c.src, greedy);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(en.decode(hyps[i]), c.tgt_text[i]) << "pair " << i << ": " << c.src_text[i];
}

}  // namespace
}  // namespace nmt
