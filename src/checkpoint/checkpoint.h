// Checkpoint folders: model.pt, optimizer.pt, state.yaml, config.yaml and the
// tokenizer models, so a checkpoint alone is enough to translate. This is the
// reading side (the inference library); train/checkpoint_writer.h writes them. No random
// generator state: dropout masks are a function of (seed, step, position)
// (ops/random/philox.h), so a resumed run draws what it would have drawn.
#pragma once

#include <c10/core/Device.h>

#include <limits>
#include <map>
#include <memory>
#include <string>

#include "checkpoint/checkpoint_files.h"
#include "checkpoint/state.h"
#include "config/config.h"
#include "model/transformer.h"
#include "ops/adam/flat_adam.h"
#include "tokenizer/tokenizer.h"

namespace nmt {

struct LoadedCheckpoint {
  std::string dir;  // the folder actually read (DIR, DIR/best or DIR/last)
  Config cfg;
  TrainingState state;
  Transformer model{nullptr};
  std::unique_ptr<Tokenizer> src_tok, tgt_tok;
  std::string src_model, tgt_model;  // the tokenizers' files, as read with the rest (export copies them)
  std::string optimizer_state;  // optimizer.pt's bytes, read with the rest for kResume
};

// Loads a checkpoint (DIR, or the run folder DIR's best/ or last/ as `use`
// says; checkpoint_files.h) without writing anything: every file is read
// from one save and verified against its manifest, then the model is built
// on `device` in eval mode. InputError naming the file on anything missing
// or corrupt.
LoadedCheckpoint load_checkpoint(const std::string& dir, const c10::Device& device,
                                 CheckpointUse use = CheckpointUse::kUse);
// The same from files read already (read_checkpoint with checkpoint_files(use)).
LoadedCheckpoint load_checkpoint(const CheckpointFiles& files, const c10::Device& device);
// The files a load for `use` reads: the model's, plus optimizer.pt for kResume.
std::vector<std::string> checkpoint_files(CheckpointUse use);
// The optimizer moments a kResume load read along with the weights.
void load_optimizer(const LoadedCheckpoint& ck, ops::FlatAdam& optimizer);

// model.pt's bytes (`path` names the file in messages) into `model`'s
// parameters; InputError naming the file when they cannot be read or a
// weight's shape is not the model's (torch::load would resize it silently).
void load_model_weights(Transformer& model, const std::string& bytes, const std::string& path);

// The model's weights and position table as model.safetensors
// (runtime/safetensors.h): what the runtime reads without LibTorch.
std::string model_safetensors(const Transformer& model);

}  // namespace nmt
