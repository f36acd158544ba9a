// The model a config describes.
#pragma once

#include <cstdint>

#include "config/config.h"
#include "model/transformer.h"

namespace nmt {

// Builds cfg.model for the given vocabulary sizes, with cfg.attention.backend.
Transformer build_model(const Config& cfg, int64_t src_vocab, int64_t tgt_vocab);
// The model of a shape (model/weight_names.h), for inference: its weights
// come from a checkpoint, its dropout is never drawn (eval mode).
Transformer build_model(const ModelShape& shape);

}  // namespace nmt
