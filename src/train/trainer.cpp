#include "train/trainer.h"

#include <torch/optim.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "checkpoint/checkpoint.h"
#include "data/dataset.h"
#include "decode/translator.h"
#include "eval/bleu.h"
#include "tokenizer/tokenizer.h"
#include "util/device.h"
#include "util/errors.h"

namespace nmt {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double learning_rate(const TrainConfig& t, int64_t step) {
  const double s = static_cast<double>(std::max<int64_t>(step, 1));
  const double w = static_cast<double>(t.warmup_steps);
  return t.lr * std::min(s / w, std::sqrt(w / s));
}

namespace {

// Mean token cross-entropy (labels smoothed by `smoothing`), padding ignored.
torch::Tensor loss_fn(const torch::Tensor& logits, const torch::Tensor& labels, double smoothing) {
  return at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), labels.reshape({-1}), {},
                                at::Reduction::Mean, kPadId, smoothing);
}

struct ValidResult {
  double loss = 0;  // unsmoothed cross-entropy per target token
  int64_t tokens = 0;
  double bleu = std::numeric_limits<double>::quiet_NaN();
  double exact = std::numeric_limits<double>::quiet_NaN();
};

ValidResult validate(Transformer& model, const ParallelCorpus& valid, int64_t batch_tokens,
                     int64_t batch_sentences, const c10::Device& device) {
  torch::NoGradGuard no_grad;
  model->eval();
  std::mt19937_64 rng(0);  // order does not matter; fixed for reproducibility
  double sum = 0;
  int64_t tokens = 0;
  for (const auto& idx : plan_batches(valid, batch_tokens, batch_sentences, rng)) {
    const Batch b = make_batch(valid, idx).to(device);
    const torch::Tensor logits = model(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths);
    sum += at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), b.tgt_out.reshape({-1}),
                                  {}, at::Reduction::Sum, kPadId, 0.0)
               .item<double>();
    tokens += b.tokens;
  }
  model->train();
  return {tokens ? sum / tokens : 0.0, tokens};
}

ParallelCorpus subset(const ParallelCorpus& c, int64_t max_n) {
  if (max_n <= 0 || max_n >= static_cast<int64_t>(c.src.size())) return c;
  ParallelCorpus s;
  s.src.assign(c.src.begin(), c.src.begin() + max_n);
  s.tgt.assign(c.tgt.begin(), c.tgt.begin() + max_n);
  s.src_text.assign(c.src_text.begin(), c.src_text.begin() + max_n);
  s.tgt_text.assign(c.tgt_text.begin(), c.tgt_text.begin() + max_n);
  return s;
}

// A one-line live display on a terminal; spdlog lines stay separate.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO)) {}
  void show(int64_t step, int64_t max_steps, double loss, double tok_s) {
    if (!enabled_) return;
    const auto now = Clock::now();
    if (now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    if (max_steps > 0)
      std::fprintf(stderr, "\r\033[K  step %lld/%lld  loss %.4f  %.0f tok/s", (long long)step,
                   (long long)max_steps, loss, tok_s);
    else
      std::fprintf(stderr, "\r\033[K  step %lld  loss %.4f  %.0f tok/s", (long long)step, loss, tok_s);
    std::fflush(stderr);
    shown_ = true;
  }
  void clear() {
    if (shown_) std::fprintf(stderr, "\r\033[K");
    shown_ = false;
  }

 private:
  bool enabled_;
  bool shown_ = false;
  Clock::time_point last_{};
};

}  // namespace

std::string resume_checkpoint(const std::string& dir) {
  const fs::path last = fs::path(dir) / "last";
  return fs::exists(last / "model.pt") ? last.string() : resolve_checkpoint_dir(dir);
}

Config resume_config(const std::string& resume_dir) {
  return load_config((fs::path(resume_checkpoint(resume_dir)) / "config.yaml").string());
}

namespace {

// One JSON object per line; appended, so an interrupted run keeps its history.
class MetricsFile {
 public:
  MetricsFile(const std::string& path, bool append) : path_(path) {
    fs::create_directories(fs::path(path).parent_path());
    out_.open(path, append ? std::ios::app : std::ios::trunc);
    if (!out_) throw InputError(path + ": cannot write metrics file");
  }
  void write(const std::vector<std::pair<std::string, double>>& fields) {
    out_ << '{';
    for (size_t i = 0; i < fields.size(); ++i) {
      char buf[64];
      const double v = fields[i].second;
      if (std::isfinite(v)) std::snprintf(buf, sizeof buf, "%.10g", v);
      else std::snprintf(buf, sizeof buf, "null");
      out_ << (i ? ", " : "") << '"' << fields[i].first << "\": " << buf;
    }
    out_ << "}\n";
    out_.flush();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace

TrainResult train(const Config& cfg, const std::string& resume_dir) {
  const TrainConfig& tc = cfg.train;
  const int64_t threads = set_threads(tc.threads);
  const c10::Device device = resolve_device(cfg.attention.device, "attention.device");
  torch::manual_seed(tc.seed);
  spdlog::info("train: device {}, {} threads, attention backend '{}'", device.str(), threads,
               cfg.attention.backend);

  // A resumed run uses the tokenizers stored with its checkpoint.
  const std::string resume_from = resume_dir.empty() ? "" : resume_checkpoint(resume_dir);
  const TokenizerPaths tok_paths =
      resume_from.empty()
          ? prepare_tokenizers(cfg.tokenizer, cfg.data.train_src, cfg.data.train_tgt)
          : TokenizerPaths{(fs::path(resume_from) / "src.model").string(),
                           (fs::path(resume_from) / "tgt.model").string()};
  // Checkpoints copy the tokenizer models from here; a stable place of the
  // run's own, since last/ itself is replaced by every save.
  const fs::path tok_dir = fs::path(tc.checkpoint_dir) / "tokenizer";
  fs::create_directories(tok_dir);
  for (const auto& [from, name] : {std::pair{tok_paths.src_model, "src.model"},
                                   std::pair{tok_paths.tgt_model, "tgt.model"}}) {
    const fs::path to = tok_dir / name;
    if (!fs::exists(to) || !fs::equivalent(from, to))
      fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  }
  const std::string src_model = (tok_dir / "src.model").string();
  const std::string tgt_model = (tok_dir / "tgt.model").string();
  const Tokenizer src_tok(src_model), tgt_tok(tgt_model);
  const ParallelCorpus train_data =
      load_parallel(cfg.data.train_src, cfg.data.train_tgt, src_tok, tgt_tok, cfg.data.max_len);
  const ParallelCorpus valid_data = subset(
      load_parallel(cfg.data.valid_src, cfg.data.valid_tgt, src_tok, tgt_tok, cfg.data.max_len),
      tc.valid_max_sentences);
  spdlog::info("data: {} training pairs ({} skipped as longer than {}), {} validation pairs; "
               "vocab {} / {}",
               train_data.src.size(), train_data.skipped, cfg.data.max_len, valid_data.src.size(),
               src_tok.vocab_size(), tgt_tok.vocab_size());

  Transformer model = build_model(cfg, src_tok.vocab_size(), tgt_tok.vocab_size());
  torch::optim::Adam optimizer(model->parameters(),
                               torch::optim::AdamOptions(tc.lr)
                                   .betas({tc.adam_beta1, tc.adam_beta2})
                                   .eps(tc.adam_eps)
                                   .weight_decay(tc.weight_decay));
  TrainingState state;
  if (!resume_from.empty()) {
    LoadedCheckpoint ck = load_checkpoint(resume_from, torch::kCPU);
    torch::NoGradGuard no_grad;
    for (auto& p : model->named_parameters()) p.value().copy_(ck.model->named_parameters()[p.key()]);
    load_optimizer(resume_from, optimizer);
    load_rng_state(resume_from);
    state = ck.state;
    spdlog::info("train: resuming {} at step {} (epoch {}, batch {})", resume_from, state.step,
                 state.epoch + 1, state.batch_in_epoch);
  }
  model->to(device);
  model->train();
  int64_t n_params = 0;
  for (const auto& p : model->parameters()) n_params += p.numel();
  spdlog::info("model: {} parameters", n_params);

  const std::string last_dir = (fs::path(tc.checkpoint_dir) / "last").string();
  const std::string best_dir = (fs::path(tc.checkpoint_dir) / "best").string();
  const auto save = [&](const std::string& dir) {
    save_checkpoint(dir, model, &optimizer, state, cfg, src_model, tgt_model);
  };
  MetricsFile metrics(tc.metrics_file.empty()
                          ? (fs::path(tc.checkpoint_dir) / "metrics.jsonl").string()
                          : tc.metrics_file,
                      /*append=*/!resume_from.empty());

  // BLEU on (a prefix of) the validation split, decoded greedily.
  std::vector<std::string> bleu_src, bleu_ref;
  for (int64_t i = 0; i < tc.valid_bleu_sentences && i < static_cast<int64_t>(valid_data.src.size()); ++i)
    bleu_src.push_back(valid_data.src_text[i]), bleu_ref.push_back(valid_data.tgt_text[i]);

  const auto start = Clock::now();
  const auto minutes = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count() / 60.0;
  };
  TrainResult result;
  result.checkpoint_dir = tc.checkpoint_dir;
  int64_t total_tokens = 0, window_tokens = 0, window_steps = 0;
  double window_loss = 0;
  auto window_start = Clock::now();
  Progress progress(tc.progress);
  bool stop = false;

  const auto evaluate_and_save = [&] {
    ValidResult v = validate(model, valid_data, tc.batch_tokens, tc.batch_sentences, device);
    if (!bleu_src.empty()) {
      model->eval();
      DecodeOptions greedy;
      greedy.max_len = cfg.decode.max_len;
      greedy.batch_size = cfg.decode.batch_size;
      const auto hyps = translate_lines(model, src_tok, tgt_tok, bleu_src, greedy, device);
      model->train();
      v.bleu = eval::corpus_bleu(hyps, bleu_ref).bleu;
      v.exact = 100.0 * exact_match(hyps, bleu_ref);
    }
    state.valid_loss = v.loss;
    state.valid_bleu = v.bleu;
    state.best_valid_loss = std::min(state.best_valid_loss, v.loss);
    const double score = tc.best_metric == "bleu" ? v.bleu : -v.loss;
    const bool best = score > state.best_score;
    if (best) {
      state.best_score = score;
      state.evals_since_best = 0;
    } else {
      ++state.evals_since_best;
    }
    progress.clear();
    spdlog::info("valid: step {} loss {:.4f} ppl {:.3f} bleu {:.2f} exact {:.1f}%{}", state.step,
                 v.loss, std::exp(v.loss), v.bleu, v.exact, best ? " (best)" : "");
    metrics.write({{"step", double(state.step)}, {"epoch", double(state.epoch + 1)},
                   {"valid_loss", v.loss}, {"valid_bleu", v.bleu}, {"valid_exact", v.exact}});
    save(last_dir);
    if (best) save(best_dir);
    return tc.patience > 0 && state.evals_since_best >= tc.patience;
  };

  while (!stop) {
    // Data order depends only on (seed, epoch): a resumed run sees the same batches.
    std::mt19937_64 rng(tc.seed * 1000003ull + static_cast<uint64_t>(state.epoch));
    const auto plan = plan_batches(train_data, tc.batch_tokens, tc.batch_sentences, rng);
    for (; state.batch_in_epoch < static_cast<int64_t>(plan.size()); ++state.batch_in_epoch) {
      const Batch b = make_batch(train_data, plan[state.batch_in_epoch]).to(device);
      ++state.step;
      const double lr = learning_rate(tc, state.step);
      for (auto& group : optimizer.param_groups())
        static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);

      optimizer.zero_grad();
      const torch::Tensor logits = model(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths);
      const torch::Tensor loss = loss_fn(logits, b.tgt_out, tc.label_smoothing);
      loss.backward();
      if (tc.clip_norm > 0) torch::nn::utils::clip_grad_norm_(model->parameters(), tc.clip_norm);
      optimizer.step();

      const double loss_v = loss.item<double>();
      if (!std::isfinite(loss_v))
        throw std::runtime_error("training diverged: loss is " + std::to_string(loss_v) +
                                 " at step " + std::to_string(state.step));
      result.final_step_loss = loss_v;
      window_loss += loss_v, ++window_steps;
      window_tokens += b.tokens + b.src_tokens;
      total_tokens += b.tokens + b.src_tokens;
      const double window_s =
          std::max(1e-9, std::chrono::duration<double>(Clock::now() - window_start).count());
      progress.show(state.step, tc.max_steps, loss_v, window_tokens / window_s);

      if (state.step % tc.log_every == 0) {
        progress.clear();
        result.last_train_loss = window_loss / window_steps;
        spdlog::info("step {} epoch {} loss {:.4f} lr {:.3e} {:.0f} tok/s", state.step,
                     state.epoch + 1, result.last_train_loss, lr, window_tokens / window_s);
        metrics.write({{"step", double(state.step)}, {"epoch", double(state.epoch + 1)},
                       {"train_loss", result.last_train_loss}, {"lr", lr},
                       {"tokens_per_s", window_tokens / window_s}});
        window_loss = 0, window_steps = 0, window_tokens = 0, window_start = Clock::now();
      }
      const bool out_of_steps = tc.max_steps > 0 && state.step >= tc.max_steps;
      const bool out_of_time = tc.max_minutes > 0 && minutes() >= tc.max_minutes;
      if (state.step % tc.eval_every == 0 || out_of_steps || out_of_time) {
        ++state.batch_in_epoch;  // this batch is consumed; a resume starts after it
        const bool patience_out = evaluate_and_save();
        --state.batch_in_epoch;
        if (patience_out) {
          spdlog::info("train: no improvement in {} evaluations, stopping", tc.patience);
          stop = true;
        }
      }
      if (out_of_steps || out_of_time) {
        if (out_of_time) spdlog::info("train: time limit of {} minutes reached", tc.max_minutes);
        stop = true;
      }
      if (stop) break;
    }
    if (stop) break;
    ++state.epoch;
    state.batch_in_epoch = 0;
    if (tc.max_epochs > 0 && state.epoch >= tc.max_epochs) {
      evaluate_and_save();
      break;
    }
  }
  progress.clear();
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  result.steps = state.step;
  result.best_valid_loss = state.best_valid_loss;
  result.best_score = state.best_score;
  result.tokens_per_second = total_tokens / std::max(seconds, 1e-9);
  spdlog::info("train: {} steps in {:.1f} s, {:.0f} tok/s overall; best valid loss {:.4f}, best {} "
               "{:.2f}; checkpoints in {}",
               state.step, seconds, result.tokens_per_second, state.best_valid_loss,
               tc.best_metric, tc.best_metric == "bleu" ? state.best_score : -state.best_score,
               tc.checkpoint_dir);
  return result;
}

}  // namespace nmt
