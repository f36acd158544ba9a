#include "runtime/engine.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <numeric>

#include "data/placeholder_mask.h"
#include "data/placeholders.h"
#include "tokenizer/tokenizer.h"
#include "util/errors.h"
#include "util/interrupt.h"
#include "util/test_hooks.h"

namespace nmt::runtime {

Engine::Engine(std::shared_ptr<const DecodingModel> model, std::shared_ptr<const Tokenizer> source,
               std::shared_ptr<const Tokenizer> target, DecodeOptions defaults, int threads)
    : model_(std::move(model)), source_(std::move(source)), target_(std::move(target)),
      defaults_(std::move(defaults)), threads_(std::max(1, threads)),
      pool_(std::make_unique<WorkerPool>(threads_)) {}

PreparedLine Engine::prepare(const std::string& line, const DecodeOptions& options) const {
  return prepare_line(line, *source_, max_positions(), options);
}

std::string Engine::finish(const PreparedLine& line, const std::vector<int64_t>& hyp) const {
  return finish_translation(line, hyp, *target_);
}

bool Engine::reached_limit(const PreparedLine& line, const std::vector<int64_t>& hyp,
                           const DecodeOptions& options) const {
  return nmt::reached_limit(line, hyp, options, max_positions());
}

std::unique_ptr<Search> Engine::new_search(const DecodeOptions& options) const {
  return std::make_unique<Search>(model_->new_state(), options, max_positions());
}

std::vector<std::vector<int64_t>> Engine::decode(const std::vector<PreparedLine>& lines,
                                                 const DecodeOptions& options) const {
  std::vector<std::vector<int64_t>> result(lines.size());
  std::vector<size_t> order;
  for (size_t i = 0; i < lines.size(); ++i)
    if (!lines[i].ids.empty()) order.push_back(i);
  // Similar lengths together: less padding, same results (padding is masked).
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return lines[a].ids.size() < lines[b].ids.size(); });
  const size_t batch = static_cast<size_t>(std::max<int64_t>(1, options.batch_size));
  const size_t batches = (order.size() + batch - 1) / batch;
  if (order.empty()) return result;
  const int64_t longest = static_cast<int64_t>(lines[order.back()].ids.size());
  // A search of up to `batch` sentences takes the next lines as its
  // sentences end, a quarter of a batch at a time: fixed batches spend their
  // last steps on the few sentences still going (often to the length
  // limit), and a step of a few rows costs nearly a full pass over the
  // weights. The longest lines go first: the input's last steps, where a
  // worker may be left decoding alone while the others have run out of
  // lines, are then the short lines' (as in scheduling jobs on several
  // machines).
  std::reverse(order.begin(), order.end());
  std::atomic<size_t> next_line{0};
  // One worker's feed: the next lines, a quarter of a batch at a time.
  class LineFeed final : public SearchFeed {
   public:
    LineFeed(const std::vector<PreparedLine>& lines, const std::vector<size_t>& order, std::atomic<size_t>& next,
             size_t batch, bool owed, std::vector<std::vector<int64_t>>& result)
        : lines_(lines), order_(order), next_(next), batch_(batch), refill_(std::max<size_t>(1, batch / 4)),
          owed_(owed), result_(result) {}
    bool join(Search& search) override {
      const size_t room = batch_ - static_cast<size_t>(search.sentences());
      if (more_ && (room >= refill_ || search.sentences() == 0)) {
        const size_t start = std::min(order_.size(), next_.fetch_add(room));
        const size_t end = std::min(order_.size(), start + room);
        more_ = end < order_.size();
        std::vector<std::vector<int64_t>> sources, owed;
        std::vector<uint64_t> tickets;
        for (size_t k = start; k < end; ++k) {
          sources.push_back(lines_[order_[k]].ids), tickets.push_back(order_[k]);
          if (owed_) owed.push_back(lines_[order_[k]].text.owed());
        }
        if (!sources.empty()) search.add(sources, tickets, owed);
      }
      return more_;
    }
    void ended(std::vector<std::pair<uint64_t, std::vector<int64_t>>> finished) override {
      for (auto& [line, ids] : finished) result_[static_cast<size_t>(line)] = std::move(ids);
    }

   private:
    const std::vector<PreparedLine>& lines_;
    const std::vector<size_t>& order_;
    std::atomic<size_t>& next_;
    const size_t batch_, refill_;
    const bool owed_;
    std::vector<std::vector<int64_t>>& result_;
    bool more_ = true;
  };
  const auto run_stream = [&] {
    std::unique_ptr<Search> search = new_search(options);
    search->plan(static_cast<int64_t>(batch) * std::max<int64_t>(1, options.beam), longest);
    LineFeed feed(lines, order, next_line, batch, !options.sentinel_ids.empty(), result);
    run_search(*search, feed);
  };
  // Searches side by side, each on one worker with single-threaded ops: a
  // decoding step is many small ops, and on a few cores waking and joining a
  // thread team for each costs more than it saves; one search alone uses
  // every thread.
  size_t workers = options.parallel_batches > 0 ? static_cast<size_t>(options.parallel_batches)
                                                : static_cast<size_t>(threads_);
  workers = model_->parallel_searches() ? std::min(workers, batches) : 1;
  const int intra = workers <= 1 ? threads_ : 1;
  std::atomic<bool> failed{false};
  const auto job = [&] {
    model_->use_threads(intra);
    try {
      if (!failed) run_stream();
    } catch (...) {
      failed = true;
      next_line = order.size();  // the others stop taking lines
      throw;
    }
  };
  pool_->run(std::vector<std::function<void()>>(workers, job));
  return result;
}

TranslationBatch Engine::translate(const std::vector<std::string>& lines, const DecodeOptions& options) const {
  TranslationBatch out;
  out.sources.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    out.sources.push_back(prepare(lines[i], options));
    if (out.sources.back().was_cut()) out.cuts.push_back({i, out.sources.back().read_tokens});
  }
  out.ids = decode(out.sources, options);
  out.translations.reserve(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    out.translations.push_back(finish(out.sources[i], out.ids[i]));
    if (reached_limit(out.sources[i], out.ids[i], options)) out.length_limited.push_back(i);
    if (auto missing = data::missing_placeholders(lines[i], out.translations[i]); !missing.empty())
      out.placeholders_lost.push_back({i, std::move(missing)});
  }
  return out;
}

std::vector<std::vector<double>> Engine::score(const std::vector<std::string>& sources,
                                               const std::vector<std::string>& targets, bool protect,
                                               int64_t batch_size) const {
  if (sources.size() != targets.size())
    throw InputError("score: " + std::to_string(sources.size()) + " sources but " + std::to_string(targets.size()) +
                     " targets");
  const size_t n = sources.size();
  std::vector<std::vector<int64_t>> xs(n), ys(n);
  const size_t positions = static_cast<size_t>(max_positions());
  for (size_t i = 0; i < n; ++i) {
    const auto [source, target] = data::model_pair(sources[i], targets[i], protect);
    xs[i] = source_->encode(source);
    ys[i] = target_->encode(target);
    // Over-long sources are cut as everywhere (fit_source), targets to what
    // the position table covers after <start>: the score is then that of the prefix.
    fit_source(xs[i], max_positions());
    if (ys[i].size() + 1 > positions) ys[i].resize(positions - 1);
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return xs[a].size() + ys[a].size() < xs[b].size() + ys[b].size();
  });
  std::vector<std::vector<double>> out(n);
  const size_t batch = static_cast<size_t>(std::max<int64_t>(1, batch_size));
  const auto job = [&] {
    model_->use_threads(threads_);
    for (size_t start = 0; start < n; start += batch) {
      test_hold("score-batch", /*until_signal=*/true);
      throw_if_interrupted();  // a safe point between batches: nothing half-done
      const size_t end = std::min(n, start + batch);
      std::vector<std::vector<int64_t>> x, y;
      for (size_t k = start; k < end; ++k) x.push_back(xs[order[k]]), y.push_back(ys[order[k]]);
      std::vector<std::vector<double>> scores = model_->score(x, y);
      for (size_t k = start; k < end; ++k) out[order[k]] = std::move(scores[k - start]);
    }
  };
  pool_->run({job});
  return out;
}

AttentionMaps Engine::attention(const PreparedLine& line, const std::vector<int64_t>& hyp) const {
  AttentionMaps maps;
  const std::function<void()> job = [&] {
    model_->use_threads(threads_);
    maps = model_->attention(line.ids, hyp);
  };
  pool_->run({job});
  return maps;
}

double mean_logprob(const std::vector<double>& token_logprobs) {
  if (token_logprobs.empty()) return 0.0;
  return std::accumulate(token_logprobs.begin(), token_logprobs.end(), 0.0) /
         static_cast<double>(token_logprobs.size());
}

}  // namespace nmt::runtime
