#include "model/parameter_table.h"

#include <stdexcept>

#include "model/transformer.h"

namespace nmt {

ModelShape model_shape(const TransformerImpl& m) {
  const TransformerOptions& o = m.options();
  ModelShape s;
  s.src_vocab = o.src_vocab(), s.tgt_vocab = o.tgt_vocab();
  s.d_model = o.d_model(), s.heads = o.heads(), s.ff_dim = o.ff_dim();
  s.encoder_layers = o.encoder_layers(), s.decoder_layers = o.decoder_layers();
  s.max_positions = o.max_positions();
  s.post_norm = o.post_norm(), s.tie_embeddings = o.tie_embeddings(), s.tie_all = o.tie_all();
  s.norm_eps = m.norm_eps();
  return s;
}

std::vector<ParamEntry> parameter_table(const TransformerImpl& m) {
  const auto params = m.named_parameters(/*recurse=*/true);
  std::vector<ParamEntry> table;
  for (WeightSpec& spec : weight_specs(model_shape(m))) {
    const at::Tensor* t = params.find(spec.name);
    if (t == nullptr) throw std::logic_error("parameter_table: the model has no parameter " + spec.name);
    ParamEntry e;
    static_cast<WeightSpec&>(e) = std::move(spec);
    e.tensor = *t;
    table.push_back(std::move(e));
  }
  if (table.size() != params.size())
    throw std::logic_error("parameter_table: the model has " + std::to_string(params.size()) +
                           " parameters, its shape names " + std::to_string(table.size()));
  return table;
}

}  // namespace nmt
