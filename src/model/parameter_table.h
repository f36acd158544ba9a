// The Transformer's parameters on the weights the model's shape names
// (model/weight_names.h): each entry is a WeightSpec with the LibTorch
// tensor that holds it. The readers that need the model's weights one by
// one take them from here: the CTranslate2 exporter (export/), the
// checkpoint's shape check and the weights it saves (checkpoint/, train/),
// and the runtime's views of a model in training (decode/). A parameter the
// names lack, or a name no parameter answers, fails parameter_table (and
// model_test's ParameterTable.*), not a reader.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "model/weight_names.h"

namespace nmt {

class TransformerImpl;

struct ParamEntry : WeightSpec {
  at::Tensor tensor;  // the parameter itself (not a copy)
};

// The shape of a built model.
ModelShape model_shape(const TransformerImpl& model);

// weight_specs(model_shape(model)), each with its parameter; std::logic_error
// when the module and the names disagree.
std::vector<ParamEntry> parameter_table(const TransformerImpl& model);

// The entry of (stack, layer, role, part) in `table`, its first use or a
// tied one; nullptr if absent.
inline const ParamEntry* find_param(const std::vector<ParamEntry>& table, ParamStack stack, int64_t layer,
                                    ParamRole role, ParamPart part) {
  return find_weight(table, stack, layer, role, part);
}

}  // namespace nmt
