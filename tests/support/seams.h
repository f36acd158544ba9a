// What tests switch inside the model that the product never does, through
// its test seam (a friend), so that no test-only method sits in its
// interface.
#pragma once

#include "model/transformer.h"

namespace nmt {

struct TransformerTestSeam {
  // false: training's encoder runs on padded rows even where packed ones apply.
  static void set_packed_encoder(Transformer& model, bool packed) { model->runtime_.packed_encoder = packed; }
  static bool packed_encoder_applies(const Transformer& model, const at::Tensor& src) {
    return model->packed_encoder_applies(src);
  }
};

}  // namespace nmt
