// Fine-tuning (train.init_from): a new run starts from a trained
// checkpoint's weights and tokenizers, with a fresh optimizer and schedule.
// The checkpoint must be of the model the config describes: every key of
// `model` (but the dropout rates and max_positions, which no weight depends
// on) and of `tokenizer` (but sample_lines, which only training a tokenizer
// reads) must match, or the run stops before anything is prepared, with one
// line naming the first key that differs.
#pragma once

#include <string>

#include "checkpoint/checkpoint_files.h"
#include "config/config.h"
#include "model/transformer.h"

namespace nmt {

// cfg.train.init_from's checkpoint (a run folder means its best/, else
// last/), read whole, its config checked against cfg. InputError naming the
// folder, or the key (e.g. "model.d_model: 256 in the config, 512 in DIR").
CheckpointFiles read_init_checkpoint(const Config& cfg);

// The check itself: `saved` is the checkpoint's config, read from `dir`.
void check_init_compatible(const Config& cfg, const Config& saved, const std::string& dir);

// Copies the checkpoint's weights into `model` in place (its parameters may
// be views of the optimizer's flat buffer).
void load_init_weights(const CheckpointFiles& files, Transformer& model);

}  // namespace nmt
