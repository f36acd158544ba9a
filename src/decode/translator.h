// nmt::Translator: a trained model opened for translation, the one entry
// point of the inference library (nmt_infer). Every command that translates
// (translate, evaluate, check-po), the service and the export's round trip
// open their checkpoint through it, as a program embedding the model would:
//
//   nmt::Translator t("checkpoints/real", nmt::DeviceKind::kCpu, nmt::ops::ComputeTypeChoice::kInt8);
//   std::vector<std::string> en = t.translate_batch({"文件不存在"}).translations;
//   nmt::DecodeOptions greedy = t.decode_options();   // the checkpoint's decode.* settings
//   greedy.beam = 0;
//   en = t.translate_batch(lines, greedy).translations;
//
// Options not given come from the checkpoint's config (attention.device,
// decode.compute_type, train.threads, attention.backend), so a checkpoint
// translates as it was configured unless told otherwise.
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "decode/decode.h"
#include "ops/attention/backend.h"
#include "ops/linear/packed_linear.h"
#include "util/device_choices.h"

namespace nmt {

// How to run the model. Each unset field takes the checkpoint's config value.
struct TranslatorOptions {
  std::optional<DeviceKind> device;                      // attention.device
  std::optional<ops::ComputeTypeChoice> compute_type;    // decode.compute_type
  std::optional<int64_t> threads;                        // train.threads (0 = all cores)
  std::optional<ops::AttentionBackend> attention;        // attention.backend
  // How errors name each choice: the command line names its flags, a program
  // the fields. An unset choice's errors name the checkpoint's config key.
  std::string device_name = "device", compute_type_name = "compute_type";
};

class Translator {
 public:
  // path: a checkpoint folder, or a run folder (its best/, else last/).
  // InputError (exit 2) for a missing or damaged checkpoint, or a choice
  // this machine cannot run (cuda without a GPU, int8 on a GPU).
  explicit Translator(const std::string& path, const TranslatorOptions& options = {});
  Translator(const std::string& path, DeviceKind device, ops::ComputeTypeChoice compute_type);

  // The checkpoint's decoding settings (decode.*: beam, length penalty,
  // length limits, placeholder handling), to adjust and pass back.
  const DecodeOptions& decode_options() const { return defaults_; }
  // The same from another decode section (the checkpoint's with some keys
  // changed): the length factor's auto resolves against the training
  // corpus's ratio and the sentinels against the target vocabulary.
  // factor_set_by names what set decode.max_len_factor (for the log).
  DecodeOptions decode_options(const DecodeConfig& decode,
                               const std::string& factor_set_by = "decode.max_len_factor") const;

  // Translates lines (one sentence each; an empty line gives an empty one),
  // in length-sorted batches, each translation as it would be alone
  // (TranslationBatch: decode/decode.h).
  TranslationBatch translate_batch(const std::vector<std::string>& lines) const {
    return translate_batch(lines, defaults_);
  }
  TranslationBatch translate_batch(const std::vector<std::string>& lines, const DecodeOptions& options) const;

  // The steps of translate_batch, for callers that hold lines between them
  // (the service's batching, translate's attention maps): a line made ready
  // once, its ids decoded, the text finished.
  PreparedLine prepare(const std::string& line, const DecodeOptions& options) const;
  std::vector<std::vector<int64_t>> decode(const std::vector<PreparedLine>& lines,
                                           const DecodeOptions& options) const;
  std::string finish(const PreparedLine& line, const std::vector<int64_t>& hyp) const;
  bool reached_limit(const PreparedLine& line, const std::vector<int64_t>& hyp, const DecodeOptions& options) const;

  // Teacher-forced log-probabilities of each target token and <end>, per
  // pair (decode/scorer.h), the pairs masked as in training when the model
  // protects placeholders, or as `mask` says.
  std::vector<std::vector<double>> score_batch(const std::vector<std::string>& sources,
                                               const std::vector<std::string>& targets) const {
    return score_batch(sources, targets, config().tokenizer.protect_placeholders);
  }
  std::vector<std::vector<double>> score_batch(const std::vector<std::string>& sources,
                                               const std::vector<std::string>& targets, bool mask,
                                               int64_t batch_size = 32) const;

  // The attention probabilities behind a translation already made (one
  // teacher-forced pass; translation_attention).
  AttentionMaps attention(const PreparedLine& line, const std::vector<int64_t>& hyp) const;

  // What was opened and how it runs.
  const LoadedCheckpoint& checkpoint() const { return ck_; }
  const Config& config() const { return ck_.cfg; }
  Transformer& model() const { return model_; }
  const Tokenizer& source_tokenizer() const { return *ck_.src_tok; }
  const Tokenizer& target_tokenizer() const { return *ck_.tgt_tok; }
  const c10::Device& device() const { return device_; }
  int64_t threads() const { return threads_; }
  int64_t max_positions() const;
  // "checkpoints/real/best (step 946)"
  std::string description() const;
  // "float32, CPU kernels avx512": the compute type decoding runs in.
  const std::string& compute_description() const { return compute_; }
  // Which decoding path runs, and why: the fused CPU step, or LibTorch op by op.
  std::string decoding_path() const;

 private:
  LoadedCheckpoint ck_;
  mutable Transformer model_{nullptr};  // decoding does not change it; LibTorch's calls are not const
  c10::Device device_{c10::kCPU};
  int64_t threads_ = 1;
  std::string compute_;
  DecodeOptions defaults_;
};

}  // namespace nmt
