// The library's side of nmt::Translator (include/nmt/translator.h): what
// was opened (the checkpoint's folder, config, state and tokenizer files),
// how it runs, and the Engine every command, the service and Python
// translate through. And the hooks by which the nmt program, which carries
// LibTorch, lends the runtime what it lacks alone: a GPU, LibTorch's own
// attention, and model.pt for checkpoints saved before model.safetensors.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/state.h"
#include "config/config.h"
#include "nmt/translator.h"
#include "ops/linear/packed_linear.h"
#include "runtime/cpu_model.h"
#include "runtime/engine.h"

namespace nmt {

struct Translator::Impl {
  std::string dir;        // the checkpoint folder read (DIR, DIR/best or DIR/last)
  Config config;
  TrainingState state;
  std::string src_model, tgt_model;  // the tokenizers' files, as read with the rest
  Device device = Device::kCpu;      // resolved: kCpu or kCuda
  AttentionBackend attention = AttentionBackend::kFlash;  // resolved
  ops::ComputeType compute_type = ops::ComputeType::kFloat32;  // resolved
  bool compute_automatic = false;    // compute_type came from auto
  int threads = 1;
  int parallel_batches = 0;          // TranslatorOptions::parallel_batches (0: one per thread)
  std::string note;                  // what is worth saying about how it was opened ("" none)
  std::unique_ptr<runtime::Engine> engine;

  // A call's options resolved against the checkpoint's decode section: the
  // length factor's auto against the training corpus's ratio, the
  // sentinels against the target vocabulary. InputError naming the field of
  // an option out of range. factor_name: what the length factor is called
  // where it was given (the log says where the limit came from).
  DecodeOptions decode_options(const TranslationOptions& options,
                               const std::string& factor_name = "max_length_factor") const;
  // "checkpoints/real/best (step 946)"
  std::string name() const;
  // "CPU runtime: int8 (auto), flash attention, avx512 kernels; 2 threads"
  std::string description() const;
};

namespace runtime {

// A program that links LibTorch (the nmt command) installs these at start;
// a program of the runtime alone has none, and a Translator that would need
// one says so (InputError).
struct TorchSupport {
  // cuda or auto -> kCpu or kCuda; InputError naming `what` when cuda is
  // asked for and there is none.
  std::function<Device(Device requested, const std::string& what)> resolve_device;
  // The weights of a checkpoint saved before model.safetensors, from its
  // model.pt bytes (files holds them), converted in memory.
  std::function<WeightSet(const CheckpointFiles& files, const ModelShape& shape)> load_weights;
  // The LibTorch model of a checkpoint (files: model.pt and the rest), for
  // a GPU or LibTorch's attention; threads: its intra-op threads.
  std::function<std::shared_ptr<const DecodingModel>(const CheckpointFiles& files, const Config& config,
                                                     const ModelShape& shape, Device device, AttentionBackend backend,
                                                     ops::ComputeType type, int threads)>
      make_model;
};
void install_torch_support(TorchSupport support);

}  // namespace runtime
}  // namespace nmt
