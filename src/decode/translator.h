// Greedy decoding: argmax each step, stop at <end> or max_len.
#pragma once

#include <torch/nn.h>

#include <string>
#include <vector>

#include "model/transformer.h"

namespace nmt {

class Tokenizer;

// sources: token ids without specials. Returns target ids without <start>
// and <end>. Sentences are decoded together; each result depends only on its
// own source. Empty sources give empty outputs.
std::vector<std::vector<int64_t>> greedy_decode(Transformer& model,
                                                const std::vector<std::vector<int64_t>>& sources,
                                                int64_t max_len, const c10::Device& device);

// Tokenize, decode in length-sorted batches of batch_size, detokenize; output
// i translates line i. An empty line gives an empty line.
std::vector<std::string> translate_lines(Transformer& model, const Tokenizer& src_tok,
                                         const Tokenizer& tgt_tok,
                                         const std::vector<std::string>& lines, int64_t batch_size,
                                         int64_t max_len, const c10::Device& device);

// Share of hypotheses equal to their reference (after trimming spaces).
double exact_match(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

}  // namespace nmt
