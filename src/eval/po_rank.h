// check-po's ranking: every translation of a checked catalog back-translated
// into English and scored by a model, and ordered by how badly its English
// fits its Chinese (eval/po_check.h has the figures it combines). The model
// comes in as two functions, so the ranking is tested without one; the CLI
// hands in the checkpoint's translator and scorer. Plain C++17, no LibTorch.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "eval/po_check.h"

namespace nmt::eval {

// A target scored given its source: the mean log-probability per token
// (the <end> included), and over how many tokens.
struct PairScore {
  double mean = 0;
  size_t tokens = 0;
};

struct PoModel {
  // Chinese lines -> the model's English for each (greedy).
  std::function<std::vector<std::string>(const std::vector<std::string>& chinese)> translate;
  // Each target scored given its source (an empty source: the target
  // alone). protect: read as a placeholder-protected model reads a pair
  // (data/placeholder_mask.h).
  std::function<std::vector<PairScore>(const std::vector<std::string>& sources, const std::vector<std::string>& targets,
                                       bool protect)>
      score;
  bool protect_placeholders = false;  // the model reads placeholders as sentinels
};

// One checked translation with the model's figures.
struct RankedItem {
  const PoItem* item = nullptr;
  std::string back;     // the Chinese translated back to English
  double score = 0;     // mean log-probability per token of the msgid given the msgstr
  double gap = 0;       // score - the same for `back`: how much less likely than the model's own
  double chrf = 0;      // chrF2 of `back` against the msgid
  // score - the msgid's mean log-probability given no source (the model as
  // a language model): what the msgstr adds to the model's belief in the
  // msgid. Low for a msgstr that says something else (a generic or common
  // msgid scores well on its own, and gets no credit for that here).
  double support = 0;
  size_t tokens = 0;    // the msgid's tokens scored (<end> included)
  // Whether this msgstr and a rival's (rival_candidates: a msgid of the
  // catalog that the back-translation resembles) look exchanged: how much
  // the mean log-probabilities of both msgids rise when each is scored with
  // the other's msgstr, summed; the best over the rivals. > 0: the two fit
  // better exchanged. A one-sided lead (another msgid likelier given this
  // msgstr) is common in clean catalogs ("Name" for "user_name"'s msgstr);
  // both sides rarely are. Unset when no msgid resembles the back-translation.
  std::optional<double> rival;
  const PoItem* rival_item = nullptr;
  FormFit form;         // length and foreign words (no model)
  double combined = 0;  // gap with form's penalties (combined_score)
  double key = 0;       // the one ranked by
};

// What the ranking orders by (lower = more suspect).
enum class RankBy { kCombined, kSupport, kGap, kScore, kChrf };
// "combined" | "support" | "gap" | "score" | "chrf"; std::invalid_argument otherwise.
RankBy parse_rank_by(const std::string& name);

// Rival msgids scored per entry (rival_candidates), each in both
// directions. With four, the exchanged entry is the best rival for four in
// five swapped entries in bench/bench_check_po.sh's catalogs; two found
// fewer swaps (95.8% against 97.5%) at more false alarms, in 60% of the time.
constexpr size_t kRivalsPerEntry = 4;

// Every item of `check` with its figures, most suspect first (a stable
// order for equal keys). The model's work: one back-translation of each
// msgstr, then its msgid scored given the msgstr, given the back-translation's
// source, given nothing, and against its rivals both ways.
std::vector<RankedItem> rank_translations(const PoCheck& check, const PoModel& model, RankBy by);

}  // namespace nmt::eval
