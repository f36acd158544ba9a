// The reference behaviour is sacreBLEU 2.x (metrics/bleu.py, metrics/chrf.py,
// tokenizers/tokenizer_13a.py, tokenizers/tokenizer_re.py). Where this code
// looks roundabout (re.sub emulated by hand, Python's whitespace set, the
// "my_log" constant) it is so that scores agree with sacreBLEU to the last digit.
#include "eval/bleu.h"

#include "util/utf8.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

namespace nmt::eval {
namespace {

constexpr int kMaxOrder = 4;
constexpr int kChrfOrder = 6;
constexpr double kChrfBeta = 2.0;
// sacreBLEU's my_log(0): keeps log() finite so a zero precision gives BLEU 0, not NaN.
constexpr double kLogZero = -9999999999.0;

// Byte length of the character at s[i] when Python's str.isspace() holds for
// it, else 0. sacreBLEU splits and strips with Python's rules, which include
// U+0085, U+00A0, U+3000 and friends; a plain ASCII test would glue tokens
// that sacreBLEU separates.
size_t space_len(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
  if (c == 0xC2 && i + 1 < s.size() && (b(i + 1) == 0x85 || b(i + 1) == 0xA0)) return 2;
  if (i + 2 >= s.size()) return 0;
  const unsigned char c1 = b(i + 1), c2 = b(i + 2);
  if (c == 0xE1 && c1 == 0x9A && c2 == 0x80) return 3;  // U+1680
  if (c == 0xE2 && c1 == 0x80 &&
      ((c2 >= 0x80 && c2 <= 0x8A) || c2 == 0xA8 || c2 == 0xA9 || c2 == 0xAF))
    return 3;                                            // U+2000..200A, 2028, 2029, 202F
  if (c == 0xE2 && c1 == 0x81 && c2 == 0x9F) return 3;  // U+205F
  if (c == 0xE3 && c1 == 0x80 && c2 == 0x80) return 3;  // U+3000
  return 0;
}

bool is_space_cp(char32_t c) {
  return c == 0x20 || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// Python's str.rstrip().
std::string_view rstrip(std::string_view s) {
  size_t end = 0;
  for (size_t i = 0; i < s.size();) {
    const size_t n = space_len(s, i);
    if (n > 0) {
      i += n;
    } else {
      end = ++i;
    }
  }
  return s.substr(0, end);
}

// Python's ' '.join(s.split()).
std::string split_join(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool pending_space = false;
  for (size_t i = 0; i < s.size();) {
    const size_t n = space_len(s, i);
    if (n > 0) {
      pending_space = !out.empty();
      i += n;
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += s[i++];
  }
  return out;
}

// Python's str.replace: left to right, non-overlapping, no rescan of the replacement.
void replace_all(std::string& s, std::string_view from, std::string_view to) {
  if (s.find(from) == std::string::npos) return;
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  s.swap(out);
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_period_comma(char c) { return c == '.' || c == ','; }

// [\{-\~\[-\` -\&\(-\+\:-\@\/] of tokenizer_re.py.
bool is_13a_symbol(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  return (c >= 0x7B && c <= 0x7E) || (c >= 0x5B && c <= 0x60) || (c >= 0x20 && c <= 0x26) ||
         (c >= 0x28 && c <= 0x2B) || (c >= 0x3A && c <= 0x40) || c == 0x2F;
}

// re.sub of a two-character pattern (first, second) -> `emit`: leftmost
// match, scanning resumes after the match. Matching bytes instead of code
// points gives the same result because each pattern pins one side to an
// ASCII character and the other side's byte is emitted unchanged.
template <typename First, typename Second, typename Emit>
std::string sub_pairs(const std::string& s, First first, Second second, Emit emit) {
  std::string out;
  out.reserve(s.size() + s.size() / 4);
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      emit(out, s[i], s[i + 1]);
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

using Gram = std::array<int32_t, kMaxOrder>;

// Sorted n-grams of order n; unused slots stay -1 so orders never compare equal.
void collect_grams(const std::vector<int32_t>& ids, int n, std::vector<Gram>& out) {
  out.clear();
  for (size_t i = 0; i + n <= ids.size(); ++i) {
    Gram g;
    g.fill(-1);
    std::copy(ids.begin() + i, ids.begin() + i + n, g.begin());
    out.push_back(g);
  }
  std::sort(out.begin(), out.end());
}

// Size of the multiset intersection of two sorted lists = sum over n-grams of
// min(hyp count, ref count), i.e. BLEU's clipped matches.
template <typename T>
int64_t clipped_matches(const std::vector<T>& hyp, const std::vector<T>& ref) {
  int64_t m = 0;
  size_t i = 0, j = 0;
  while (i < hyp.size() && j < ref.size()) {
    if (hyp[i] < ref[j]) {
      ++i;
    } else if (ref[j] < hyp[i]) {
      ++j;
    } else {
      ++m;
      ++i;
      ++j;
    }
  }
  return m;
}

// Token ids of a 13a-tokenized line (tokens are separated by single spaces).
void to_ids(const std::string& tokenized, std::unordered_map<std::string, int32_t>& vocab,
            std::vector<int32_t>& ids) {
  ids.clear();
  std::string tok;
  for (size_t pos = 0; pos < tokenized.size();) {
    size_t end = tokenized.find(' ', pos);
    if (end == std::string::npos) end = tokenized.size();
    tok.assign(tokenized, pos, end - pos);
    const auto it = vocab.try_emplace(tok, static_cast<int32_t>(vocab.size())).first;
    ids.push_back(it->second);
    pos = end + 1;
  }
}

// UTF-8 -> code points minus Python whitespace (chrF's "".join(s.split())).
// A byte that starts no valid sequence becomes U+DC80+byte, like Python's
// surrogateescape, so malformed input still yields distinct characters.
std::u32string chrf_chars(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp;
    int len = utf8::next(s, i, &cp);
    if (len == 0) {
      cp = 0xDC00 + static_cast<unsigned char>(s[i]);
      len = 1;
    }
    if (!is_space_cp(cp)) out += cp;
    i += static_cast<size_t>(len);
  }
  return out;
}

void collect_char_grams(const std::u32string& s, int n, std::vector<std::u32string_view>& out) {
  out.clear();
  for (size_t i = 0; i + n <= s.size(); ++i) out.emplace_back(s.data() + i, n);
  std::sort(out.begin(), out.end());
}

void check_sizes(const char* what, size_t hyps, size_t refs) {
  if (hyps != refs)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(hyps) +
                                " hypotheses but " + std::to_string(refs) + " references");
}

}  // namespace

std::string tokenize_13a(const std::string& line) {
  std::string s(rstrip(line));
  replace_all(s, "<skipped>", "");
  replace_all(s, "-\n", "");
  replace_all(s, "\n", " ");
  if (s.find('&') != std::string::npos) {
    // In this order, as sacreBLEU does: "&amp;lt;" becomes "<".
    replace_all(s, "&quot;", "\"");
    replace_all(s, "&amp;", "&");
    replace_all(s, "&lt;", "<");
    replace_all(s, "&gt;", ">");
  }

  std::string padded;
  padded.reserve(s.size() * 2 + 2);
  padded += ' ';
  for (const char c : s) {
    if (is_13a_symbol(c)) {
      padded += ' ';
      padded += c;
      padded += ' ';
    } else {
      padded += c;
    }
  }
  padded += ' ';

  const auto not_digit = [](char c) { return !is_digit(c); };
  // Period and comma split off unless preceded by a digit ...
  std::string t = sub_pairs(padded, not_digit, is_period_comma, [](std::string& o, char a, char b) {
    o += a;
    o += ' ';
    o += b;
    o += ' ';
  });
  // ... or unless followed by one ("3.5", "1,000" survive).
  t = sub_pairs(t, is_period_comma, not_digit, [](std::string& o, char a, char b) {
    o += ' ';
    o += a;
    o += ' ';
    o += b;
  });
  // A dash after a digit ("1990-2000").
  t = sub_pairs(t, is_digit, [](char c) { return c == '-'; }, [](std::string& o, char a, char b) {
    o += a;
    o += ' ';
    o += b;
    o += ' ';
  });
  return split_join(t);
}

BleuResult corpus_bleu(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  check_sizes("corpus_bleu", hyps.size(), refs.size());
  BleuResult r;
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<int32_t> hyp_ids, ref_ids;
  std::vector<Gram> hyp_grams, ref_grams;
  for (size_t i = 0; i < hyps.size(); ++i) {
    to_ids(tokenize_13a(hyps[i]), vocab, hyp_ids);
    to_ids(tokenize_13a(refs[i]), vocab, ref_ids);
    r.hyp_len += static_cast<int64_t>(hyp_ids.size());
    r.ref_len += static_cast<int64_t>(ref_ids.size());
    for (int n = 1; n <= kMaxOrder; ++n) {
      collect_grams(hyp_ids, n, hyp_grams);
      collect_grams(ref_ids, n, ref_grams);
      r.totals[n - 1] += static_cast<int64_t>(hyp_grams.size());
      r.matches[n - 1] += clipped_matches(hyp_grams, ref_grams);
    }
  }

  if (r.hyp_len < r.ref_len) {
    r.brevity_penalty =
        r.hyp_len > 0 ? std::exp(1.0 - static_cast<double>(r.ref_len) / r.hyp_len) : 0.0;
  } else {
    r.brevity_penalty = 1.0;
  }
  r.precisions.fill(0.0);
  if (std::all_of(r.matches.begin(), r.matches.end(), [](int64_t m) { return m == 0; })) {
    r.bleu = 0.0;
    return r;
  }
  // "exp" smoothing (mteval-v13a): the k-th order without matches gets 1 / (2^k * total).
  double smooth = 1.0;
  for (int n = 0; n < kMaxOrder; ++n) {
    if (r.totals[n] == 0) break;  // later precisions stay 0, so BLEU is 0
    if (r.matches[n] == 0) {
      smooth *= 2.0;
      r.precisions[n] = 100.0 / (smooth * static_cast<double>(r.totals[n]));
    } else {
      r.precisions[n] =
          100.0 * static_cast<double>(r.matches[n]) / static_cast<double>(r.totals[n]);
    }
  }
  double log_sum = 0.0;
  for (const double p : r.precisions) log_sum += p == 0.0 ? kLogZero : std::log(p);
  r.bleu = r.brevity_penalty * std::exp(log_sum / kMaxOrder);
  return r;
}

std::string format_bleu(const BleuResult& r) {
  const double ratio =
      r.ref_len > 0 ? static_cast<double>(r.hyp_len) / static_cast<double>(r.ref_len) : 0.0;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "BLEU = %.2f %.1f/%.1f/%.1f/%.1f (BP = %.3f ratio = %.3f hyp_len = %lld "
                "ref_len = %lld)",
                r.bleu, r.precisions[0], r.precisions[1], r.precisions[2], r.precisions[3],
                r.brevity_penalty, ratio, static_cast<long long>(r.hyp_len),
                static_cast<long long>(r.ref_len));
  return buf;
}

double chrf(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  check_sizes("chrf", hyps.size(), refs.size());
  std::array<int64_t, kChrfOrder> n_hyp{}, n_ref{}, n_match{};
  std::vector<std::u32string_view> hyp_grams, ref_grams;
  for (size_t i = 0; i < hyps.size(); ++i) {
    const std::u32string h = chrf_chars(hyps[i]);
    const std::u32string r = chrf_chars(refs[i]);
    for (int n = 1; n <= kChrfOrder; ++n) {
      collect_char_grams(h, n, hyp_grams);
      collect_char_grams(r, n, ref_grams);
      // sacreBLEU drops the hypothesis count when the reference has no n-gram
      // of this order, so short references do not lower precision.
      if (!ref_grams.empty()) n_hyp[n - 1] += static_cast<int64_t>(hyp_grams.size());
      n_ref[n - 1] += static_cast<int64_t>(ref_grams.size());
      n_match[n - 1] += clipped_matches(hyp_grams, ref_grams);
    }
  }
  double avg_prec = 0.0, avg_rec = 0.0;
  int effective_order = 0;
  for (int n = 0; n < kChrfOrder; ++n) {
    if (n_hyp[n] > 0 && n_ref[n] > 0) {
      avg_prec += static_cast<double>(n_match[n]) / static_cast<double>(n_hyp[n]);
      avg_rec += static_cast<double>(n_match[n]) / static_cast<double>(n_ref[n]);
      ++effective_order;
    }
  }
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0.0) return 0.0;
  const double factor = kChrfBeta * kChrfBeta;
  return 100.0 * (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec);
}

namespace {

std::string trim_blanks(const std::string& s) {
  const auto a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

}  // namespace

double exact_match(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  check_sizes("exact_match", hyps.size(), refs.size());
  if (refs.empty()) return 0.0;
  int64_t hits = 0;
  for (size_t i = 0; i < refs.size(); ++i) hits += trim_blanks(hyps[i]) == trim_blanks(refs[i]);
  return static_cast<double>(hits) / static_cast<double>(refs.size());
}

}  // namespace nmt::eval
