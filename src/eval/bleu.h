// Corpus BLEU and chrF with sacreBLEU's default settings, so scores printed
// during training can be compared with published `sacrebleu` numbers.
// Plain C++17: no LibTorch, usable from any tool or test.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace nmt::eval {

struct BleuResult {
  double bleu = 0.0;                    // 0..100
  std::array<double, 4> precisions{};   // percent, after smoothing
  double brevity_penalty = 0.0;
  int64_t hyp_len = 0, ref_len = 0;     // tokens after 13a tokenization
  std::array<int64_t, 4> matches{};     // clipped n-gram matches per order
  std::array<int64_t, 4> totals{};      // hypothesis n-grams per order
};

// sacreBLEU's "13a" tokenizer (mteval-v13a) applied the way sacreBLEU's BLEU
// applies it: to the right-stripped line. UTF-8 passes through byte for
// byte; whitespace is what Python's str.split() treats as whitespace,
// including the multi-byte Unicode spaces (U+00A0, U+3000, ...).
std::string tokenize_13a(const std::string& line);

// sacreBLEU's corpus_score with its defaults: one reference per hypothesis,
// 13a tokenization, mixed case, n-grams up to 4, "exp" smoothing, no
// effective order (so a corpus without any 4-gram scores 0, as in
// sacreBLEU). An empty reference counts as zero tokens where sacreBLEU >= 2
// refuses the corpus: a blank line in a validation set should not abort training.
// std::invalid_argument when the two lists differ in length.
BleuResult corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

// "BLEU = 35.12 64.3/40.1/27.5/19.1 (BP = 0.981 ratio = 0.981 hyp_len = 1234 ref_len = 1258)"
std::string format_bleu(const BleuResult& r);

// sacreBLEU's CHRF() defaults: character n-grams up to 6 over Unicode code
// points with whitespace removed, beta = 2, effective-order averaging (no
// eps smoothing). 0..100. std::invalid_argument when the lists differ in length.
double chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

// Share (0..1) of hypotheses equal to their reference, ignoring leading and
// trailing spaces and tabs. 0 for an empty corpus; std::invalid_argument when
// the lists differ in length.
double exact_match(const std::vector<std::string>& hyps, const std::vector<std::string>& refs);

}  // namespace nmt::eval
