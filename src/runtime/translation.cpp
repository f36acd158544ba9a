#include "runtime/translation.h"

#include <algorithm>

#include "data/placeholders.h"
#include "runtime/length_limit.h"
#include "tokenizer/tokenizer.h"

namespace nmt {

int64_t target_limit(const DecodeOptions& options, int64_t src_tokens) {
  if (options.max_len_factor <= 0) return options.max_len;
  const double bound = options.max_len_factor * static_cast<double>(src_tokens) + kLengthSlack;
  return std::max<int64_t>(1, std::min<int64_t>(options.max_len, static_cast<int64_t>(bound)));
}

int64_t decode_limit(const DecodeOptions& options, int64_t max_positions, int64_t src_tokens) {
  return std::min(target_limit(options, src_tokens), max_positions - 1);
}

bool reached_limit(const DecodeOptions& options, int64_t max_positions, int64_t src_tokens, int64_t hyp_tokens) {
  return src_tokens > 0 && hyp_tokens >= decode_limit(options, max_positions, src_tokens);
}

DecodeOptions decode_options(const DecodeConfig& decode, bool protect_placeholders, const Tokenizer* target,
                             double corpus_ratio, const std::string& factor_set_by) {
  DecodeOptions o;
  o.max_len = decode.max_len;
  const LengthFactor factor = resolve_length_factor(decode.max_len_factor, corpus_ratio, factor_set_by);
  o.max_len_factor = factor.factor;
  o.max_len_origin = factor.origin;
  o.batch_size = decode.batch_size;
  o.beam = decode.beam;
  o.length_penalty = decode.length_penalty;
  o.protect_placeholders = protect_placeholders;
  if (o.protect_placeholders && decode.placeholder_constraint && target)
    for (const std::string& s : data::sentinel_symbols()) o.sentinel_ids.push_back(target->piece_id(s));
  return o;
}

SourceText::SourceText(const std::string& line, const DecodeOptions& options)
    : line_(line), protect_(options.protect_placeholders) {
  if (!protect_) return;
  masked_ = data::mask_source(line);
  if (options.sentinel_ids.empty()) return;
  for (int k : data::sentinels_in(masked_.text))
    if (const int64_t id = options.sentinel_ids[static_cast<size_t>(k - 1)]; id >= 0) owed_.push_back(id);
}

std::string SourceText::finish(const std::string& translation) const {
  return protect_ ? data::restore_target(translation, masked_) : translation;
}

std::string SourceText::shown(const std::string& text) const {
  return protect_ ? data::show_sentinels(text, masked_) : text;
}

int64_t fit_source(std::vector<int64_t>& ids, int64_t max_positions) {
  const int64_t tokens = static_cast<int64_t>(ids.size());
  if (tokens > max_positions) ids.resize(static_cast<size_t>(max_positions));
  return tokens;
}

std::string describe_cuts(const std::vector<SourceCut>& cuts, int64_t limit, int64_t first_line) {
  constexpr size_t kNamed = 10;
  std::string out = std::to_string(cuts.size()) + (cuts.size() == 1 ? " source" : " sources") +
                    " longer than the " + std::to_string(limit) + " tokens this model reads " +
                    (cuts.size() == 1 ? "was" : "were") + " cut to the first " + std::to_string(limit) + ":";
  for (size_t i = 0; i < cuts.size() && i < kNamed; ++i)
    out += std::string(i ? "," : "") + " line " + std::to_string(first_line + static_cast<int64_t>(cuts[i].line)) +
           " (" + std::to_string(cuts[i].tokens) + " tokens)";
  if (cuts.size() > kNamed) out += ", and " + std::to_string(cuts.size() - kNamed) + " more";
  return out;
}

size_t file_chunk_lines(const DecodeOptions& options) {
  return static_cast<size_t>(std::max<int64_t>(options.batch_size, 1)) * 64;
}

PreparedLine prepare_line(const std::string& line, const Tokenizer& src_tok, int64_t max_positions,
                          const DecodeOptions& options) {
  PreparedLine p{SourceText(line, options), {}, 0};
  p.ids = src_tok.encode(p.text.text());
  p.read_tokens = fit_source(p.ids, max_positions);
  return p;
}

std::string finish_translation(const PreparedLine& line, const std::vector<int64_t>& hyp, const Tokenizer& tgt_tok) {
  return line.ids.empty() ? std::string() : line.text.finish(tgt_tok.decode(hyp));
}

bool reached_limit(const PreparedLine& line, const std::vector<int64_t>& hyp, const DecodeOptions& options,
                   int64_t max_positions) {
  return reached_limit(options, max_positions, static_cast<int64_t>(line.ids.size()),
                       static_cast<int64_t>(hyp.size()));
}

std::string describe_lost_placeholders(const std::vector<LostPlaceholders>& lost, size_t count,
                                       bool protect_placeholders, int64_t first_line) {
  constexpr size_t kNamed = 5;
  std::string out = std::to_string(lost.size()) + " of " + std::to_string(count) +
                    (count == 1 ? " translation" : " translations") +
                    " lost placeholders of their source, which breaks a program that prints them:";
  for (size_t i = 0; i < lost.size() && i < kNamed; ++i) {
    std::string which;
    for (const std::string& p : lost[i].missing) which += (which.empty() ? "" : ", ") + p;
    out += std::string(i ? "," : "") + " line " + std::to_string(first_line + static_cast<int64_t>(lost[i].line)) +
           " (" + which + ")";
  }
  if (lost.size() > kNamed) out += ", and " + std::to_string(lost.size() - kNamed) + " more";
  return out + (protect_placeholders
                    ? " (decode.placeholder_constraint makes a protected model write every one)"
                    : "; this model does not protect placeholders (tokenizer.protect_placeholders: false): one trained "
                      "with it keeps them (docs/placeholders.md)");
}

}  // namespace nmt
