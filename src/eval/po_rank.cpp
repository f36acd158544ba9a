#include "eval/po_rank.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

#include "data/placeholder_mask.h"
#include "eval/bleu.h"

namespace nmt::eval {

RankBy parse_rank_by(const std::string& name) {
  if (name == "combined") return RankBy::kCombined;
  if (name == "support") return RankBy::kSupport;
  if (name == "gap") return RankBy::kGap;
  if (name == "score") return RankBy::kScore;
  if (name == "chrf") return RankBy::kChrf;
  throw std::invalid_argument("rank by '" + name + "': expected combined, support, gap, score or chrf");
}

std::vector<RankedItem> rank_translations(const PoCheck& check, const PoModel& model, RankBy by) {
  const size_t n = check.items.size();
  std::vector<std::string> chinese, english;
  for (const auto& item : check.items) {
    chinese.push_back(item.chinese);
    english.push_back(item.english);
  }
  const bool masked = model.protect_placeholders;
  const std::vector<std::string> back = model.translate(chinese);
  const std::vector<PairScore> msgid_lp = model.score(chinese, english, masked);
  const std::vector<PairScore> back_lp = model.score(chinese, back, masked);
  // The same target tokens as msgid_lp's, masked as in that pair, with an
  // empty source.
  std::vector<std::string> nothing(n), english_as_scored;
  for (size_t i = 0; i < n; ++i) english_as_scored.push_back(data::model_pair(chinese[i], english[i], masked).second);
  const std::vector<PairScore> prior_lp = model.score(nothing, english_as_scored, false);
  // Rivals: each msgstr scored against the msgids its back-translation
  // resembles most, and their msgstrs against its msgid (a few per entry,
  // so this costs a few more scoring passes, not one per pair of entries).
  std::vector<size_t> self(n);
  std::iota(self.begin(), self.end(), size_t{0});
  const auto rivals = rival_candidates(back, english, self, kRivalsPerEntry);
  std::vector<std::string> rival_src, rival_tgt, crossed_src, crossed_tgt;
  for (size_t i = 0; i < rivals.size(); ++i)
    for (const size_t j : rivals[i]) {
      rival_src.push_back(chinese[i]), rival_tgt.push_back(english[j]);
      crossed_src.push_back(chinese[j]), crossed_tgt.push_back(english[i]);
    }
  const std::vector<PairScore> rival_lp = model.score(rival_src, rival_tgt, masked);
  const std::vector<PairScore> crossed_lp = model.score(crossed_src, crossed_tgt, masked);
  std::vector<RankedItem> ranked;
  size_t next_rival = 0;
  for (size_t i = 0; i < n; ++i) {
    RankedItem r;
    r.item = &check.items[i];
    r.back = back[i];
    r.score = msgid_lp[i].mean;
    r.tokens = msgid_lp[i].tokens;
    r.gap = r.score - back_lp[i].mean;
    r.chrf = chrf({back[i]}, {english[i]});
    r.support = r.score - prior_lp[i].mean;
    r.form = form_fit(english[i], chinese[i]);
    for (const size_t j : rivals[i]) {
      const double mine = rival_lp[next_rival].mean - r.score;
      const double theirs = crossed_lp[next_rival].mean - msgid_lp[j].mean;
      ++next_rival;
      if (!r.rival || mine + theirs > *r.rival) {
        r.rival = mine + theirs;
        r.rival_item = &check.items[j];
      }
    }
    r.combined = combined_score(r.gap, r.rival.value_or(0.0), r.form);
    r.key = by == RankBy::kScore     ? r.score
            : by == RankBy::kGap     ? r.gap
            : by == RankBy::kSupport ? r.support
            : by == RankBy::kChrf    ? r.chrf
                                     : r.combined;
    ranked.push_back(std::move(r));
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const RankedItem& a, const RankedItem& b) { return a.key < b.key; });
  return ranked;
}

}  // namespace nmt::eval
