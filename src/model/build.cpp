#include "model/build.h"

namespace nmt {

Transformer build_model(const Config& cfg, int64_t src_vocab, int64_t tgt_vocab) {
  const auto& m = cfg.model;
  Transformer model(TransformerOptions(src_vocab, tgt_vocab)
                        .d_model(m.d_model)
                        .heads(m.heads)
                        .encoder_layers(m.encoder_layers)
                        .decoder_layers(m.decoder_layers)
                        .ff_dim(m.ff_dim)
                        .dropout(m.dropout)
                        .activation_dropout(m.activation_dropout)
                        .attention_dropout(m.attention_dropout)
                        .post_norm(m.norm == "post")
                        .tie_embeddings(m.tie_embeddings)
                        .tie_all(m.tie_all)
                        .max_positions(m.max_positions));
  model->set_attention_backend(cfg.attention.backend);
  return model;
}

Transformer build_model(const ModelShape& s) {
  return Transformer(TransformerOptions(s.src_vocab, s.tgt_vocab)
                         .d_model(s.d_model)
                         .heads(s.heads)
                         .encoder_layers(s.encoder_layers)
                         .decoder_layers(s.decoder_layers)
                         .ff_dim(s.ff_dim)
                         .post_norm(s.post_norm)
                         .tie_embeddings(s.tie_embeddings)
                         .tie_all(s.tie_all)
                         .max_positions(s.max_positions));
}

}  // namespace nmt
