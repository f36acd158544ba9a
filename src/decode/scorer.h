// Teacher-forced scoring: how likely the model finds a given translation of a
// source, token by token (the forward pass of training, without the loss).
// Used to rank catalog entries by how well their English fits their Chinese
// (nmt check-po) and to compare log-probabilities with another runtime.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <vector>

#include "model/transformer.h"

namespace nmt {

class Tokenizer;

// For each pair (sources[i], targets[i]): the log-probability of each target
// token y1 .. yn and of <end>, given the source and the target prefix.
// Pairs are scored in length-sorted batches of `batch_size`; a pair's figures
// do not depend on its batch. InputError when the lists differ in length.
// protect_placeholders: the pairs are masked as in training (the tokens
// scored are those of the masked target). A side longer than the model's
// position table is cut to fit (the scores are then those of its prefix).
// Throws Interrupted between batches once SIGINT or SIGTERM came in (where
// the command installed the handlers, util/interrupt.h).
std::vector<std::vector<double>> score_pairs(Transformer& model, const Tokenizer& src_tok,
                                             const Tokenizer& tgt_tok,
                                             const std::vector<std::string>& sources,
                                             const std::vector<std::string>& targets,
                                             const c10::Device& device, bool protect_placeholders = false,
                                             int64_t batch_size = 32);

// Mean of a pair's token log-probabilities (the <end> included): a per-token
// score comparable across targets of different lengths.
double mean_logprob(const std::vector<double>& token_logprobs);

}  // namespace nmt
