// Shared fixtures: the toy corpus prepared once (its tokenizers and shards,
// under the system temp dir, reused by every test process), a tiny model
// config and a few teacher-forced Adam steps.
// Temporary folders and child processes: support/temp_dir.h, support/process.h.
#pragma once

#include <filesystem>
#include <string>

#include <torch/optim.h>

#include <vector>

#include "config/config.h"
#include "data/dataset.h"
#include "data/prepare.h"
#include "model/build.h"
#include "model/transformer.h"
#include "tokenizer/tokenizer.h"
#include "train/loss.h"

namespace nmt::testing {

inline std::string source_dir() { return NMT_SOURCE_DIR; }
inline std::string toy(const std::string& file) { return source_dir() + "/data/toy/" + file; }

// Where the tests' prepared corpora live: a config with data.prepared_dir
// set here and the default tokenizer settings finds the toy corpus ready.
inline std::string prepared_parent() {
  return (std::filesystem::temp_directory_path() / "nmt_test_prepared").string();
}

// The toy training corpus prepared with the default settings (tokenizers and shards).
inline const data::PrepareReport& toy_tokenizers() {
  static const data::PrepareReport report = [] {
    Config cfg;
    cfg.data.train_src = toy("train.zh");
    cfg.data.train_tgt = toy("train.en");
    cfg.data.prepared_dir = prepared_parent();
    return data::prepare_corpus(cfg);
  }();
  return report;
}

// The toy training corpus prepared with one shared vocabulary
// (tokenizer.shared), in a folder of its own (a corpus is prepared per pair
// of training files: sharing the default one would prepare it again and again).
inline std::string shared_prepared_parent() {
  return (std::filesystem::temp_directory_path() / "nmt_test_prepared_shared").string();
}
inline const data::PrepareReport& toy_shared_tokenizers() {
  static const data::PrepareReport report = [] {
    Config cfg;
    cfg.data.train_src = toy("train.zh");
    cfg.data.train_tgt = toy("train.en");
    cfg.data.prepared_dir = shared_prepared_parent();
    cfg.tokenizer.shared = true;
    return data::prepare_corpus(cfg);
  }();
  return report;
}

// Small enough to train in seconds on 2 cores.
inline Config tiny_config() {
  Config cfg;
  cfg.model.d_model = 32;
  cfg.model.heads = 4;
  cfg.model.encoder_layers = 2;
  cfg.model.decoder_layers = 2;
  cfg.model.ff_dim = 64;
  cfg.model.dropout = 0.0;
  cfg.train.label_smoothing = 0.0;
  return cfg;
}

// Teacher-forced Adam steps on one batch (no label smoothing); returns the
// loss of every step. Leaves the model in training mode.
inline std::vector<double> train_steps(Transformer& model, const Batch& b, int steps, double lr) {
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(lr));
  model->train();
  std::vector<double> losses;
  for (int step = 0; step < steps; ++step) {
    opt.zero_grad();
    const auto loss = token_loss_sum(model, b, 0.0) / static_cast<double>(b.tokens);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

}  // namespace nmt::testing
