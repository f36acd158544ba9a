#include "nmt/translator.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <cmath>
#include <mutex>
#include <thread>

#include "data/text_io.h"
#include "runtime/cpu_decoding_model.h"
#include "runtime/safetensors.h"
#include "runtime/translator_impl.h"
#include "tokenizer/tokenizer.h"
#include "util/atomic_file.h"
#include "util/cpu_features.h"
#include "util/device_choices.h"

namespace nmt {

namespace runtime {

namespace {

std::mutex& support_mutex() {
  static std::mutex m;
  return m;
}
TorchSupport& support() {
  static TorchSupport s;
  return s;
}

}  // namespace

void install_torch_support(TorchSupport s) {
  std::lock_guard<std::mutex> lock(support_mutex());
  support() = std::move(s);
}

namespace {

TorchSupport torch_support() {
  std::lock_guard<std::mutex> lock(support_mutex());
  return support();
}

// The files every translation reads; the weights come from model.safetensors
// when the checkpoint has it.
const std::vector<std::string> kCheckpointFiles{"config.yaml", "state.yaml", "src.model", "tgt.model"};
constexpr const char* kWeightsFile = "model.safetensors";

void check_range(const char* field, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi)) {
    char text[128];
    std::snprintf(text, sizeof text, "%s: %g is not in %g..%g", field, value, lo, hi);
    throw InputError(text);
  }
}

}  // namespace
}  // namespace runtime

Translator::Translator(const std::string& path, const TranslatorOptions& options) {
  using namespace runtime;
  auto impl = std::make_shared<Impl>();
  const TorchSupport torch = torch_support();
  CheckpointFiles files = read_checkpoint(path, CheckpointUse::kUse, kCheckpointFiles, {kWeightsFile});
  impl->note = files.note;
  impl->dir = files.dir;
  impl->config = parse_config(files.at("config.yaml"), files.path("config.yaml"));
  impl->state = parse_training_state(files.at("state.yaml"), files.path("state.yaml"));
  impl->src_model = files.at("src.model");
  impl->tgt_model = files.at("tgt.model");
  auto src = std::make_shared<const Tokenizer>(Tokenizer::from_bytes(impl->src_model, files.path("src.model")));
  auto tgt = std::make_shared<const Tokenizer>(Tokenizer::from_bytes(impl->tgt_model, files.path("tgt.model")));
  const Config& cfg = impl->config;
  const std::string config_key = files.path("config.yaml") + ": ";

  // Where it runs: the CPU runtime, or the LibTorch model the program lends.
  const Device device = options.device.value_or(cfg.attention.device);
  if (device == Device::kCpu) {
    impl->device = Device::kCpu;
  } else if (torch.resolve_device) {
    impl->device = torch.resolve_device(device, options.device ? "device" : config_key + "attention.device");
  } else if (device == Device::kAuto) {
    impl->device = Device::kCpu;  // the runtime alone has no GPU to find
  } else {
    throw InputError(std::string(options.device ? "device" : config_key + "attention.device") +
                     ": cuda needs the nmt program (it carries LibTorch and the CUDA kernels); this runtime runs on "
                     "the CPU");
  }
  // Its attention: the checkpoint's naive or flash; a model trained with
  // LibTorch's attention translates with flash, the same function, unless
  // told otherwise.
  const AttentionBackend configured = cfg.attention.backend;
  impl->attention = options.attention ? *options.attention
                                      : configured == AttentionBackend::kTorch ? AttentionBackend::kFlash : configured;
  // Its dense layers' arithmetic.
  const std::string type_what = options.compute_type ? "compute_type" : config_key + "decode.compute_type";
  const ComputeType choice = options.compute_type.value_or(cfg.decode.compute_type);
  impl->compute_automatic = choice == ComputeType::kAuto;
  impl->compute_type = ops::resolve_compute_type(choice);
  if (impl->device == Device::kCuda) {
    if (impl->compute_type == ops::ComputeType::kInt8 && !impl->compute_automatic)
      throw InputError(type_what + ": int8 runs on the CPU only (device cuda); use float32 or bf16");
    if (impl->compute_type == ops::ComputeType::kInt8) impl->compute_type = ops::ComputeType::kFloat32;
  }
  const int threads = options.threads.value_or(static_cast<int>(cfg.train.threads));
  if (threads < 0 || threads > 4096) check_range("threads", threads, 0, 4096);
  impl->threads = threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (options.parallel_batches) check_range("parallel_batches", *options.parallel_batches, 1, 4096);
  impl->parallel_batches = options.parallel_batches.value_or(0);

  const ModelShape shape = model_shape(cfg.model, src->vocab_size(), tgt->vocab_size());
  std::shared_ptr<const DecodingModel> model;
  // The runtime's kernels run every CPU decode but LibTorch's own attention
  // in float32 (the torch backend has no packed path: its bf16 and int8 run
  // flash).
  const bool runtime_model = impl->device == Device::kCpu &&
                             !(impl->attention == AttentionBackend::kTorch &&
                               impl->compute_type == ops::ComputeType::kFloat32);
  if (runtime_model) {
    WeightSet weights;
    std::string source = files.path(kWeightsFile);
    if (files.bytes.count(kWeightsFile)) {
      auto bytes = std::make_shared<std::string>(std::move(files.bytes.at(kWeightsFile)));
      files.bytes.erase(kWeightsFile);
      weights.tensors = read_safetensors(*bytes, source);
      weights.storage = bytes;
    } else if (torch.load_weights) {
      const CheckpointFiles pt = read_checkpoint(impl->dir, CheckpointUse::kUse, {"model.pt"});
      weights = torch.load_weights(pt, shape);
      source = pt.path("model.pt");
      impl->note += (impl->note.empty() ? "" : "; ") + source +
                    ": read through LibTorch (the checkpoint predates model.safetensors; `nmt convert " + impl->dir +
                    "` adds it, and then the runtime alone opens it)";
    } else {
      throw InputError(source + ": missing (the checkpoint was saved before nmt wrote its weights in a form read "
                       "without LibTorch): run `nmt convert " + impl->dir + "` once, which adds it");
    }
    CpuModelOptions o;
    o.type = impl->compute_type;
    o.naive_attention = impl->attention == AttentionBackend::kNaive;
    if (impl->attention == AttentionBackend::kTorch) impl->attention = AttentionBackend::kFlash;
    model = std::make_shared<CpuDecodingModel>(std::make_shared<const CpuModel>(shape, std::move(weights), o, source));
  } else if (torch.make_model) {
    const CheckpointFiles pt = read_checkpoint(impl->dir, CheckpointUse::kUse, {"model.pt"});
    model = torch.make_model(pt, cfg, shape, impl->device, impl->attention, impl->compute_type, impl->threads);
  } else {
    throw InputError(std::string(impl->device == Device::kCuda ? "device cuda" : "attention torch") +
                     " needs the nmt program (it carries LibTorch); the runtime alone translates on the CPU with "
                     "the naive or flash attention kernels");
  }
  DecodeOptions defaults =
      decode_options(cfg.decode, cfg.tokenizer.protect_placeholders, tgt.get(), impl->state.target_source_ratio);
  defaults.parallel_batches = impl->parallel_batches;
  impl->engine = std::make_unique<Engine>(std::move(model), std::move(src), std::move(tgt), std::move(defaults),
                                          impl->threads);
  impl_ = std::move(impl);
}

Translator::~Translator() = default;
Translator::Translator(Translator&&) noexcept = default;
Translator& Translator::operator=(Translator&&) noexcept = default;

DecodeOptions Translator::Impl::decode_options(const TranslationOptions& options,
                                               const std::string& factor_name) const {
  using runtime::check_range;
  DecodeConfig d = config.decode;
  if (options.placeholder_constraint) d.placeholder_constraint = *options.placeholder_constraint;
  if (options.max_length_factor) {
    if (*options.max_length_factor == TranslationOptions::kAutoLengthFactor) {
      d.max_len_factor.reset();
    } else {
      check_range("max_length_factor", *options.max_length_factor, 0, 1000);
      d.max_len_factor = *options.max_length_factor;
    }
  }
  const bool factor_given = options.max_length_factor && d.max_len_factor;
  DecodeOptions o = nmt::decode_options(d, config.tokenizer.protect_placeholders, &engine->target_tokenizer(),
                                        state.target_source_ratio,
                                        factor_given ? factor_name : "decode.max_len_factor");
  if (options.max_decoding_length) check_range("max_decoding_length", *options.max_decoding_length, 1, 4096);
  if (options.max_batch_size) check_range("max_batch_size", *options.max_batch_size, 1, 100000);
  if (options.beam_size) check_range("beam_size", *options.beam_size, 0, 64);
  if (options.length_penalty) check_range("length_penalty", *options.length_penalty, 0, 10);
  o.max_len = options.max_decoding_length.value_or(o.max_len);
  o.batch_size = options.max_batch_size.value_or(o.batch_size);
  o.beam = options.beam_size.value_or(o.beam);
  o.length_penalty = options.length_penalty.value_or(o.length_penalty);
  o.parallel_batches = parallel_batches;
  o.cancel = options.cancel;
  return o;
}

std::string Translator::Impl::name() const { return dir + " (step " + std::to_string(state.step) + ")"; }

std::string Translator::Impl::description() const {
  return engine->model().description() + "; " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
}

std::vector<TranslationResult> Translator::translate_batch(const std::vector<std::string>& lines,
                                                           const TranslationOptions& options) const {
  const TranslationBatch batch = impl_->engine->translate(lines, impl_->decode_options(options));
  std::vector<TranslationResult> out(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    out[i].hypotheses = {batch.translations[i]};
    out[i].source_tokens = static_cast<int64_t>(batch.sources[i].ids.size());
    out[i].source_cut = batch.sources[i].was_cut();
  }
  for (const size_t i : batch.length_limited) out[i].length_limited = true;
  for (const LostPlaceholders& l : batch.placeholders_lost) out[l.line].placeholders_lost = l.missing;
  return out;
}

TranslationStats Translator::translate_file(const std::string& input, const std::string& output,
                                            const TranslationOptions& options) const {
  if (output.empty()) throw InputError("translate_file: give an output file");
  const DecodeOptions opts = impl_->decode_options(options);
  LineReader reader(input);
  const auto start = std::chrono::steady_clock::now();
  // In chunks (file_chunk_lines), so that a large file never sits in memory
  // whole: each chunk's translations go to a temporary beside the output,
  // which takes the output's place once every line is translated
  // (util/atomic_file.h).
  const size_t chunk = file_chunk_lines(opts);
  AtomicFile file(output);
  std::ofstream out(file.temp_path(), std::ios::binary | std::ios::trunc);
  if (!out) throw IoError(output + ": cannot write: " + std::strerror(errno));
  TranslationStats stats;
  for (;;) {
    if (opts.cancel != nullptr && opts.cancel->load()) throw Cancelled();
    const std::vector<std::string> lines = reader.next(chunk, stats.lines, output);
    if (lines.empty()) break;
    const TranslationBatch batch = impl_->engine->translate(lines, opts);
    for (const std::string& t : batch.translations) out << t << '\n';
    if (!out) throw IoError(output + ": cannot write: " + std::strerror(errno));
    stats.lines += static_cast<int64_t>(lines.size());
    stats.source_cut += static_cast<int64_t>(batch.cuts.size());
    stats.length_limited += static_cast<int64_t>(batch.length_limited.size());
    stats.placeholders_lost += static_cast<int64_t>(batch.placeholders_lost.size());
  }
  out.close();
  if (!out) throw IoError(output + ": cannot write: " + std::strerror(errno));
  file.commit();
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

std::vector<std::vector<double>> Translator::score_batch(const std::vector<std::string>& sources,
                                                         const std::vector<std::string>& targets) const {
  return impl_->engine->score(sources, targets, impl_->config.tokenizer.protect_placeholders);
}

std::string Translator::model_name() const { return impl_->name(); }

std::string Translator::description() const { return impl_->description(); }

}  // namespace nmt
