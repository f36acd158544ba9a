// BLEU/chrF against hand-computed values and against NLTK's corpus_bleu
// (tests/bleu_reference.py), an implementation that shares no code with ours.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "eval/bleu.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace nmt::eval {
namespace {

// ---------------------------------------------------------------- 13a tokenizer

TEST(Tokenize13a, Punctuation) {
  EXPECT_EQ(tokenize_13a("Hello, world!"), "Hello , world !");
  EXPECT_EQ(tokenize_13a("(paren) [brack] {brace}"), "( paren ) [ brack ] { brace }");
  EXPECT_EQ(tokenize_13a("a/b c:d e@f g=h"), "a / b c : d e @ f g = h");
  EXPECT_EQ(tokenize_13a("e.g. U.S. end."), "e . g . U . S . end .");
  EXPECT_EQ(tokenize_13a("$5.00 costs 50% off"), "$ 5.00 costs 50 % off");
}

TEST(Tokenize13a, NumbersKeepTheirSeparators) {
  EXPECT_EQ(tokenize_13a("It costs 3.5 dollars."), "It costs 3.5 dollars .");
  EXPECT_EQ(tokenize_13a("About 1,000 people, 2,5 or 7."), "About 1,000 people , 2,5 or 7 .");
  EXPECT_EQ(tokenize_13a("x.5 5.x ,5 5, 5.5.5"), "x . 5 5 . x , 5 5 , 5.5.5");
  // A dash splits only after a digit.
  EXPECT_EQ(tokenize_13a("1990-2000 well-known"), "1990 - 2000 well-known");
}

TEST(Tokenize13a, ApostrophesEntitiesAndMarkup) {
  EXPECT_EQ(tokenize_13a("I don't know."), "I don't know .");
  EXPECT_EQ(tokenize_13a("&quot;Tom &amp; Jerry&quot;"), "\" Tom & Jerry \"");
  // Unescaped one after another, as sacreBLEU does: "&amp;lt;" ends up as "<".
  EXPECT_EQ(tokenize_13a("a&lt;b&gt;c &amp;lt;"), "a < b > c <");
  EXPECT_EQ(tokenize_13a("<skipped>word"), "word");
  EXPECT_EQ(tokenize_13a("line-\nbreak two\nlines"), "linebreak two lines");
}

TEST(Tokenize13a, WhitespaceAndUtf8) {
  EXPECT_EQ(tokenize_13a("  spaced \t  out  \n"), "spaced out");
  EXPECT_EQ(tokenize_13a(""), "");
  EXPECT_EQ(tokenize_13a("trailing- "), "trailing-");
  // Non-ASCII punctuation is not 13a's business; Unicode spaces (NBSP,
  // U+3000) separate tokens as in Python's str.split().
  EXPECT_EQ(tokenize_13a("中文，测试。"), "中文，测试。");
  EXPECT_EQ(tokenize_13a("a\xC2\xA0" "b\xE3\x80\x80" "c"), "a b c");
}

// ---------------------------------------------------------------- hand-computed BLEU

TEST(CorpusBleu, IdenticalCorpusScores100) {
  const std::vector<std::string> c = {"The cat sat on the mat.", "It is 3.5 metres long, isn't it?"};
  const BleuResult r = corpus_bleu(c, c);
  EXPECT_DOUBLE_EQ(r.bleu, 100.0);
  EXPECT_DOUBLE_EQ(r.brevity_penalty, 1.0);
  for (const double p : r.precisions) EXPECT_DOUBLE_EQ(p, 100.0);
  EXPECT_EQ(r.hyp_len, 16);  // 7 + 9 tokens after 13a
  EXPECT_EQ(r.ref_len, 16);
}

TEST(CorpusBleu, EmptyHypothesesScoreZero) {
  const BleuResult r = corpus_bleu({"", ""}, {"the cat sat on the mat", "a dog"});
  EXPECT_EQ(r.bleu, 0.0);
  EXPECT_EQ(r.hyp_len, 0);
  EXPECT_EQ(r.ref_len, 8);
  EXPECT_EQ(r.brevity_penalty, 0.0);
  EXPECT_EQ(corpus_bleu({}, {}).bleu, 0.0);
}

TEST(CorpusBleu, LongerHypothesisHasNoBrevityPenalty) {
  const BleuResult r = corpus_bleu({"the cat sat on the mat today"}, {"the cat sat on the mat"});
  EXPECT_DOUBLE_EQ(r.brevity_penalty, 1.0);
  EXPECT_EQ(r.matches, (std::array<int64_t, 4>{6, 5, 4, 3}));
  EXPECT_EQ(r.totals, (std::array<int64_t, 4>{7, 6, 5, 4}));
  // (6/7 * 5/6 * 4/5 * 3/4)^(1/4) = (3/7)^(1/4)
  EXPECT_NEAR(r.bleu, 100.0 * std::pow(3.0 / 7.0, 0.25), 1e-9);
}

TEST(CorpusBleu, ShorterHypothesisPaysBrevityPenalty) {
  const BleuResult r = corpus_bleu({"the cat sat on the mat"}, {"the cat sat on the mat today"});
  const double bp = std::exp(1.0 - 7.0 / 6.0);
  EXPECT_LT(r.brevity_penalty, 1.0);
  EXPECT_NEAR(r.brevity_penalty, bp, 1e-12);
  for (const double p : r.precisions) EXPECT_DOUBLE_EQ(p, 100.0);
  EXPECT_NEAR(r.bleu, 100.0 * bp, 1e-9);
}

TEST(CorpusBleu, ClippingAndExpSmoothing) {
  // "the" appears twice in the reference, so 2 of the 7 unigrams count.
  // No bigram matches: the k-th order without matches gets 100 / (2^k * total).
  const BleuResult r = corpus_bleu({"the the the the the the the"}, {"the cat is on the mat"});
  EXPECT_EQ(r.matches, (std::array<int64_t, 4>{2, 0, 0, 0}));
  EXPECT_EQ(r.totals, (std::array<int64_t, 4>{7, 6, 5, 4}));
  const std::array<double, 4> p = {100.0 * 2 / 7, 100.0 / (2 * 6), 100.0 / (4 * 5), 100.0 / (8 * 4)};
  for (int n = 0; n < 4; ++n) EXPECT_NEAR(r.precisions[n], p[n], 1e-12) << "order " << n + 1;
  const double expected = std::exp(
      (std::log(p[0]) + std::log(p[1]) + std::log(p[2]) + std::log(p[3])) / 4.0);
  EXPECT_NEAR(r.bleu, expected, 1e-9);
  EXPECT_DOUBLE_EQ(r.brevity_penalty, 1.0);
}

TEST(CorpusBleu, NoFourGramsScoresZeroAsSacreBleu) {
  // Without effective order sacreBLEU stops at the first order with no
  // n-grams at all and the missing precision makes BLEU 0.
  const BleuResult r = corpus_bleu({"a b c"}, {"a b c"});
  EXPECT_EQ(r.totals[3], 0);
  EXPECT_EQ(r.bleu, 0.0);
  EXPECT_DOUBLE_EQ(r.precisions[2], 100.0);
}

TEST(CorpusBleu, CountsAreCorpusLevel) {
  // Statistics are summed over sentences before precisions are taken; n-grams
  // never cross a sentence boundary.
  const BleuResult r = corpus_bleu({"a b c d", "e f g h"}, {"a b c d", "x y z w"});
  EXPECT_EQ(r.matches, (std::array<int64_t, 4>{4, 3, 2, 1}));
  EXPECT_EQ(r.totals, (std::array<int64_t, 4>{8, 6, 4, 2}));
  EXPECT_NEAR(r.bleu, 100.0 * std::pow(0.5 * 0.5 * 0.5 * 0.5, 0.25), 1e-9);
}

TEST(CorpusBleu, MismatchedSizesThrow) {
  EXPECT_THROW(corpus_bleu({"a"}, {}), std::invalid_argument);
  EXPECT_THROW(chrf({}, {"a"}), std::invalid_argument);
}

TEST(CorpusBleu, FormatsLikeSacreBleu) {
  BleuResult r;
  r.bleu = 35.125;  // exactly representable: rounds half to even like Python
  r.precisions = {64.34, 40.06, 27.5, 19.14};
  r.brevity_penalty = 0.98112;
  r.hyp_len = 1234;
  r.ref_len = 1258;
  EXPECT_EQ(format_bleu(r),
            "BLEU = 35.12 64.3/40.1/27.5/19.1 (BP = 0.981 ratio = 0.981 hyp_len = 1234 "
            "ref_len = 1258)");
  EXPECT_EQ(format_bleu(BleuResult{}),
            "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 0)");
}

// ---------------------------------------------------------------- chrF

TEST(Chrf, HandComputed) {
  const std::vector<std::string> c = {"The cat sat.", "中文 测试"};
  EXPECT_DOUBLE_EQ(chrf(c, c), 100.0);
  EXPECT_EQ(chrf({"abc"}, {"xyz"}), 0.0);
  // Orders 1..3 are effective: P = R = (2/3 + 1/2 + 0) / 3 = 7/18, so F2 = 7/18.
  // Orders 4..6 have no reference n-grams and are left out.
  EXPECT_NEAR(chrf({"abc"}, {"abd"}), 100.0 * 7.0 / 18.0, 1e-9);
  // Characters are code points, not bytes, and whitespace is ignored.
  EXPECT_NEAR(chrf({"我爱你"}, {"我 爱他"}), 100.0 * 7.0 / 18.0, 1e-9);
  // Statistics are summed over the corpus, but a hypothesis's 4-grams count
  // only where its reference has 4-grams: P = (7/8 + 5/6 + 3/4 + 1) / 4 = 83/96,
  // R = 1, F2 = 5PR / (4P + R) = 415/428.
  EXPECT_NEAR(chrf({"abcd", "wxyz"}, {"abc", "wxyz"}), 100.0 * 415.0 / 428.0, 1e-9);
}

// ---------------------------------------------------------------- against NLTK

const char* const kPython = "/usr/bin/python3";

using testing::run_capture;

struct Corpus {
  std::vector<std::string> hyps, refs;
};

// Words on which 13a tokenization is the identity (checked below), so the
// reference script's whitespace split sees the tokens we see.
const std::vector<std::string> kVocab = {
    "the", "a",   "cat", "dog",   "sat",  "on",  "mat",  "and",   "is",   "was",
    "big", "old", "in",  "house", "of",   "to",  "it",   "very",  "his",  "her",
    "?",   "!",   ".",   ",",     "3.5",  "1,000", "don't", "well-known", "Paris", "ran"};

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

// References of 4..20 words; hypotheses are edited copies. Non-empty
// hypotheses keep >= 4 tokens: below that NLTK's per-sentence max(1, count)
// denominators differ from sacreBLEU's (see bleu_reference.py).
Corpus make_corpus(uint32_t seed, int pairs, double p_sub, double p_del, double p_ins) {
  std::mt19937 rng(seed);
  const auto word = [&] { return kVocab[rng() % kVocab.size()]; };
  const auto chance = [&](double p) { return (rng() % 10000) < p * 10000; };
  Corpus c;
  for (int i = 0; i < pairs; ++i) {
    std::vector<std::string> ref, hyp;
    const int len = 4 + static_cast<int>(rng() % 17);
    for (int k = 0; k < len; ++k) ref.push_back(word());
    for (const auto& w : ref) {
      if (chance(p_ins)) hyp.push_back(word());
      if (chance(p_del)) continue;
      hyp.push_back(chance(p_sub) ? word() : w);
    }
    while (hyp.size() < 4) hyp.push_back(word());
    c.refs.push_back(join(ref));
    c.hyps.push_back(join(hyp));
  }
  return c;
}

class NltkReference : public ::testing::Test {
 protected:
  void SetUp() override {
    int status = 0;
    run_capture(std::string(kPython) + " -c 'import nltk' 2>&1", &status);
    if (status != 0) GTEST_SKIP() << kPython << " with nltk not available (apt-get install python3-nltk)";
    dir_ = testing::temp_dir(std::string("nltk_") +
                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }

  double nltk_bleu(const Corpus& c) {
    const auto write = [](const std::filesystem::path& p, const std::vector<std::string>& lines) {
      std::ofstream f(p, std::ios::binary);
      for (const auto& l : lines) f << l << '\n';
    };
    write(dir_ / "hyp.txt", c.hyps);
    write(dir_ / "ref.txt", c.refs);
    const std::string cmd = std::string(kPython) + " '" + NMT_SOURCE_DIR +
                            "/tests/bleu_reference.py' '" + (dir_ / "hyp.txt").string() + "' '" +
                            (dir_ / "ref.txt").string() + "' 2>&1";
    int status = 0;
    const std::string out = run_capture(cmd, &status);
    EXPECT_EQ(status, 0) << cmd << "\n" << out;
    return status == 0 ? std::stod(out) : std::nan("");
  }

  // Our score, after checking the identity-tokenization premise.
  static BleuResult ours(const Corpus& c) {
    for (const auto* lines : {&c.hyps, &c.refs})
      for (const auto& l : *lines) EXPECT_EQ(tokenize_13a(l), l);
    return corpus_bleu(c.hyps, c.refs);
  }

  std::filesystem::path dir_;
};

constexpr double kTolerance = 0.01;  // BLEU points

TEST_F(NltkReference, LightNoise) {
  const Corpus c = make_corpus(1, 300, 0.10, 0.05, 0.05);
  const BleuResult r = ours(c);
  EXPECT_GT(r.bleu, 20.0);
  EXPECT_LT(r.bleu, 95.0);
  EXPECT_NEAR(r.bleu, nltk_bleu(c), kTolerance) << format_bleu(r);
}

TEST_F(NltkReference, DeletionsGiveBrevityPenalty) {
  const Corpus c = make_corpus(2, 300, 0.15, 0.30, 0.0);
  const BleuResult r = ours(c);
  EXPECT_LT(r.brevity_penalty, 0.9) << format_bleu(r);
  EXPECT_NEAR(r.bleu, nltk_bleu(c), kTolerance) << format_bleu(r);
}

TEST_F(NltkReference, InsertionsEmptyAndOverlongHypotheses) {
  Corpus c = make_corpus(3, 200, 0.10, 0.0, 0.30);
  c.hyps.push_back("");  // an empty hypothesis still adds its reference length
  c.refs.push_back("the old cat sat on his mat");
  c.hyps.push_back("the cat sat on the mat and the dog sat on the mat and it was very big");
  c.refs.push_back("the cat sat on the mat");
  const BleuResult r = ours(c);
  EXPECT_GT(r.hyp_len, r.ref_len);
  EXPECT_DOUBLE_EQ(r.brevity_penalty, 1.0);
  EXPECT_NEAR(r.bleu, nltk_bleu(c), kTolerance) << format_bleu(r);

  // Mostly empty: now the empty lines' reference lengths make BP < 1.
  Corpus sparse = make_corpus(4, 40, 0.1, 0.1, 0.1);
  for (size_t i = 0; i < sparse.hyps.size(); i += 3) sparse.hyps[i].clear();
  const BleuResult rs = ours(sparse);
  EXPECT_LT(rs.brevity_penalty, 1.0);
  EXPECT_NEAR(rs.bleu, nltk_bleu(sparse), kTolerance) << format_bleu(rs);
}

TEST_F(NltkReference, ExpSmoothingOfOrdersWithoutMatches) {
  // Reversed sentences of distinct words: every unigram matches, no bigram does.
  Corpus c;
  c.refs = {"the big old cat sat", "a dog ran to Paris", "his house is very old"};
  for (const auto& ref : c.refs) {
    std::istringstream in(ref);
    std::vector<std::string> words{std::istream_iterator<std::string>(in), {}};
    std::reverse(words.begin(), words.end());
    c.hyps.push_back(join(words));
  }
  const BleuResult r = ours(c);
  EXPECT_EQ(r.matches, (std::array<int64_t, 4>{15, 0, 0, 0})) << format_bleu(r);
  EXPECT_NEAR(r.bleu, nltk_bleu(c), kTolerance) << format_bleu(r);
}

}  // namespace
}  // namespace nmt::eval
