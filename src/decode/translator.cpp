#include "decode/translator.h"

#include <torch/torch.h>

#include "decode/scorer.h"
#include "util/cpu_features.h"
#include "util/device.h"
#include "util/errors.h"

namespace nmt {

Translator::Translator(const std::string& path, DeviceKind device, ops::ComputeTypeChoice compute_type)
    : Translator(path, [&] {
        TranslatorOptions o;
        o.device = device;
        o.compute_type = compute_type;
        return o;
      }()) {}

Translator::Translator(const std::string& path, const TranslatorOptions& options) {
  // A device given is checked before the (slower) checkpoint load.
  if (options.device) device_ = resolve_device(*options.device, options.device_name);
  ck_ = load_checkpoint(path, device_);
  model_ = ck_.model;
  if (!options.device) {
    device_ = resolve_device(ck_.cfg.attention.device, ck_.dir + "/config.yaml: attention.device");
    model_->to(device_);
  }
  model_->set_attention_backend(options.attention ? *options.attention
                                                  : ops::parse_backend(ck_.cfg.attention.backend));
  threads_ = set_threads(options.threads.value_or(ck_.cfg.train.threads));

  // The dense layers' arithmetic: on the CPU they are packed for it once; on
  // a GPU bf16 is the model's bf16 matrix multiplies and int8 is refused.
  const std::string what = options.compute_type ? options.compute_type_name : "decode.compute_type";
  const ops::ComputeTypeChoice choice =
      options.compute_type ? *options.compute_type : ops::kComputeTypeChoices.parse(ck_.cfg.decode.compute_type, what);
  const ops::ComputeType type = ops::resolve_compute_type(choice);
  const bool automatic = choice == ops::ComputeTypeChoice::kAuto;
  if (!device_.is_cpu()) {
    if (type == ops::ComputeType::kInt8 && !automatic)
      throw InputError(what + ": int8 runs on the CPU only (device " + device_.str() + "); use float32 or bf16");
    const bool bf16 = type == ops::ComputeType::kBf16;
    model_->set_matmul_dtype(bf16 ? at::kBFloat16 : at::kFloat);
    compute_ = bf16 ? "bf16" : "float32";
  } else {
    model_->prepare_decoding(type);
    compute_ = ops::compute_type_name(type) + std::string(automatic ? " (auto)" : "") + ", CPU kernels " +
               isa_name(kernel_isa());
  }
  defaults_ = decode_options(ck_.cfg.decode);
}

DecodeOptions Translator::decode_options(const DecodeConfig& decode, const std::string& factor_set_by) const {
  return nmt::decode_options(decode, ck_.cfg.tokenizer.protect_placeholders, ck_.tgt_tok.get(),
                             ck_.state.target_source_ratio, factor_set_by);
}

TranslationBatch Translator::translate_batch(const std::vector<std::string>& lines,
                                             const DecodeOptions& options) const {
  return translate_lines(model_, *ck_.src_tok, *ck_.tgt_tok, lines, options, device_);
}

PreparedLine Translator::prepare(const std::string& line, const DecodeOptions& options) const {
  return prepare_line(line, *ck_.src_tok, model_, options);
}

std::vector<std::vector<int64_t>> Translator::decode(const std::vector<PreparedLine>& lines,
                                                     const DecodeOptions& options) const {
  return decode_lines(model_, lines, options, device_);
}

std::string Translator::finish(const PreparedLine& line, const std::vector<int64_t>& hyp) const {
  return finish_translation(line, hyp, *ck_.tgt_tok);
}

bool Translator::reached_limit(const PreparedLine& line, const std::vector<int64_t>& hyp,
                               const DecodeOptions& options) const {
  return nmt::reached_limit(line, hyp, options, model_);
}

std::vector<std::vector<double>> Translator::score_batch(const std::vector<std::string>& sources,
                                                         const std::vector<std::string>& targets, bool mask,
                                                         int64_t batch_size) const {
  return score_pairs(model_, *ck_.src_tok, *ck_.tgt_tok, sources, targets, device_, mask, batch_size);
}

AttentionMaps Translator::attention(const PreparedLine& line, const std::vector<int64_t>& hyp) const {
  return translation_attention(model_, line.ids, hyp, device_);
}

int64_t Translator::max_positions() const { return model_->options().max_positions(); }

std::string Translator::description() const {
  return ck_.dir + " (step " + std::to_string(ck_.state.step) + ")";
}

std::string Translator::decoding_path() const {
  if (!device_.is_cpu()) return "LibTorch on " + device_.str();
  const ops::AttentionBackend backend = model_->attention_backend();
  if (backend != ops::AttentionBackend::kTorch)
    return "fused CPU step (" + ops::backend_name(backend) + " attention kernels)";
  if (model_->compute_type() != ops::ComputeType::kFloat32)
    return "fused CPU step (flash attention kernels: the torch backend has no " +
           std::string(ops::compute_type_name(model_->compute_type())) + " path)";
  return "LibTorch op by op (attention backend torch in float32; --attention flash or naive runs the fused CPU "
         "step)";
}

}  // namespace nmt
