#include "serve/translation_service.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "data/placeholders.h"
#include "runtime/search.h"
#include "tokenizer/special_ids.h"
#include "tokenizer/tokenizer.h"
#include "util/device.h"
#include "util/thread_env.h"
#include "util/utf8.h"

namespace nmt::serve {

namespace {

using nlohmann::json;

// maps: per layer [H, Tq, Tk] -> [L][H][Tq][Tk], rounded to 4 decimals
// (plenty for a heatmap, a third of the bytes).
json nested(const std::vector<runtime::AttentionMap>& maps) {
  json layers = json::array();
  for (const runtime::AttentionMap& m : maps) {
    json heads = json::array();
    for (int64_t h = 0; h < m.heads; ++h) {
      json rows = json::array();
      for (int64_t i = 0; i < m.rows; ++i) {
        json row = json::array();
        for (int64_t j = 0; j < m.cols; ++j) row.push_back(std::round(m.at(h, i, j) * 1e4) / 1e4);
        rows.push_back(std::move(row));
      }
      heads.push_back(std::move(rows));
    }
    layers.push_back(std::move(heads));
  }
  return layers;
}

}  // namespace

TranslationService::TranslationService(Model model, Metrics& metrics) : m_(std::move(model)), metrics_(metrics) {
  if (m_.workers > 1) set_blas_threads(1);  // OpenBLAS' pool is global; each worker's ops run on its own thread
}

Job TranslationService::make_job(const TranslateRequest& request) const {
  Job job;
  job.lines = request.text;
  job.beam = job_beam(request, m_.decode.beam);
  job.attention = request.attention;
  for (size_t i = 0; i < job.lines.size(); ++i) {
    // Cut as every entry point cuts (fit_source); the answer names the line.
    job.sources.push_back(engine().prepare(job.lines[i], m_.decode));
    if (job.sources.back().was_cut()) job.cut.push_back(i);
    job.tokens.push_back(static_cast<int64_t>(job.sources.back().ids.size()));
  }
  judge_fit(job);
  return job;
}

void TranslationService::judge_fit(const Job& job) const {
  // A verdict on at least this many tokens (a request of a few words says little).
  constexpr int64_t kJudgedTokens = 16;
  std::lock_guard<std::mutex> lock(fit_mutex_);
  for (const PreparedLine& line : job.sources) fit_window_.add(line.ids, kUnkId);
  if (fit_window_.tokens < kJudgedTokens) return;
  const std::string misfit = eval::input_fit_problems(fit_window_);
  const auto now = std::chrono::steady_clock::now();
  if (!misfit.empty() && (last_fit_warning_ == std::chrono::steady_clock::time_point{} ||
                          now - last_fit_warning_ > std::chrono::minutes(1))) {
    spdlog::warn("serve: the requests are unlike what this model was trained on: {}; its translations of them are "
                 "likely wrong ({})",
                 misfit, m_.translator->model_name());
    last_fit_warning_ = now;
  }
  fit_window_ = {};
}

std::vector<Sentences> TranslationService::run_batch(const std::vector<const Job*>& jobs) {
  const auto start = std::chrono::steady_clock::now();
  // One call over every line of the batch: translate_lines sorts them by
  // length and decodes them in sub-batches, as `nmt translate` does.
  std::vector<PreparedLine> lines;
  int64_t source_tokens = 0;
  for (const Job* job : jobs) {
    lines.insert(lines.end(), job->sources.begin(), job->sources.end());
    source_tokens += job->total_tokens();
  }
  DecodeOptions options = worker_options(jobs.front()->beam);  // the Batcher groups jobs by beam
  if (m_.workers == 1 && engine().model().parallel_searches()) {
    // The only worker: the batch is cut into one sub-batch per thread (of
    // similar lengths: the engine sorts first), or its decoding would run on
    // one core while the others idle.
    const int64_t workers = std::max<int64_t>(1, options.parallel_batches > 0 ? options.parallel_batches
                                                                               : engine().threads());
    const int64_t n = static_cast<int64_t>(lines.size());
    options.batch_size = std::max<int64_t>(1, std::min(options.batch_size, (n + workers - 1) / workers));
  }
  const std::vector<std::vector<int64_t>> hyps = engine().decode(lines, options);
  std::vector<Sentences> results;
  size_t k = 0;
  int64_t target_tokens = 0, limited = 0;
  for (const Job* job : jobs) {
    Sentences r(job->lines.size());
    for (size_t i = 0; i < job->lines.size(); ++i, ++k) {
      r[i] = finish_sentence(lines[k], hyps[k], job->attention, options);
      target_tokens += static_cast<int64_t>(hyps[k].size());
      limited += r[i].length_limited ? 1 : 0;
    }
    results.push_back(std::move(r));
  }
  metrics_.batch(static_cast<int64_t>(lines.size()),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  metrics_.translated(static_cast<int64_t>(lines.size()), source_tokens, target_tokens, limited);
  return results;
}

DecodeOptions TranslationService::worker_options(int64_t beam) const {
  DecodeOptions options = m_.decode;
  options.beam = beam;
  if (m_.workers > 1) {
    // One of several workers: this batch gets one thread alone.
    options.parallel_batches = 1;
  }
  return options;
}

// A worker's continuous batching: its jobs' lines as sentences of one
// runtime::Search, each with its job's beam width, driven by the runtime's
// one loop (runtime::run_search) with the worker's JobQueue as its feed. A
// job is answered when its last line ends (a job of empty lines at once).
class TranslationService::SearchStream final : public StepStream, private runtime::SearchFeed {
 public:
  explicit SearchStream(TranslationService& service)
      : service_(service), options_(service.worker_options(0)), search_(service.engine().new_search(options_)) {
    // This worker's ops: its own thread alone when there are several workers.
    service.engine().use_threads(service.m_.workers > 1 ? 1 : service.engine().threads());
  }

  void run(JobQueue& queue) override {
    queue_ = &queue;
    runtime::run_search(*search_, *this);
  }

  void release() override {
    search_->release();
    release_free_host_memory();
  }

 private:
  bool join(runtime::Search& search) override {
    const std::optional<JobQueue::Tickets> jobs = queue_->take(*this, search.rows() > 0, search.source_tokens());
    if (!jobs) return false;
    queue_->start(*jobs, [&](const JobQueue::Tickets& t) { add(t); });
    // Timed from here: the step that follows.
    step_rows_ = search.rows();
    step_start_ = std::chrono::steady_clock::now();
    return true;
  }

  void ended(std::vector<std::pair<uint64_t, std::vector<int64_t>>> finished) override {
    service_.metrics_.batch(
        step_rows_, std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start_).count());
    for (auto& [row, ids] : finished) {
      const auto [ticket, line] = row_of_.at(row);
      row_of_.erase(row);
      JobProgress& p = jobs_.at(ticket);
      p.sentences[line] = service_.finish_sentence(p.job->sources[line], ids, p.job->attention, options_);
      p.target_tokens += static_cast<int64_t>(ids.size());
      p.length_limited += p.sentences[line].length_limited ? 1 : 0;
      if (--p.running == 0) finish(ticket);
    }
  }

  // Starts the jobs' lines, all in one encoder pass; throws leaving the
  // stream as it was.
  void add(const JobQueue::Tickets& jobs) {
    std::vector<std::vector<int64_t>> sources, owed;
    std::vector<int64_t> beams;
    std::vector<uint64_t> rows;                       // search tickets, from next_row_ on
    std::vector<std::pair<uint64_t, size_t>> lines;   // rows[i] is (job ticket, line) lines[i]
    std::vector<std::pair<uint64_t, JobProgress>> added;
    for (const auto& [job, ticket] : jobs) {
      JobProgress p{std::vector<SentenceResult>(job->lines.size()), job, 0, 0, 0, 0};
      for (size_t i = 0; i < job->sources.size(); ++i) {
        const PreparedLine& line = job->sources[i];
        if (line.ids.empty()) continue;  // translates to "", as the Engine has it
        p.source_tokens += static_cast<int64_t>(line.ids.size());
        sources.push_back(line.ids);
        owed.push_back(line.text.owed());
        beams.push_back(job->beam);
        rows.push_back(next_row_ + rows.size());
        lines.push_back({ticket, i});
        ++p.running;
      }
      added.emplace_back(ticket, std::move(p));
    }
    if (!sources.empty()) search_->add(sources, rows, owed, beams);
    next_row_ += rows.size();
    for (size_t i = 0; i < rows.size(); ++i) row_of_[rows[i]] = lines[i];
    for (auto& [ticket, p] : added) {
      const bool empty = p.running == 0;
      jobs_[ticket] = std::move(p);
      if (empty) finish(ticket);  // only empty lines: answered at once
    }
  }

  // A job whose last line ended: its results, and the service's figures.
  void finish(uint64_t ticket) {
    JobProgress& p = jobs_.at(ticket);
    // Empty lines never ran: their (empty) translation and map.
    for (size_t i = 0; i < p.sentences.size(); ++i)
      if (p.job->sources[i].ids.empty())
        p.sentences[i] = service_.finish_sentence(p.job->sources[i], {}, p.job->attention, options_);
    service_.metrics_.translated(static_cast<int64_t>(p.sentences.size()), p.source_tokens, p.target_tokens,
                                 p.length_limited);
    Sentences sentences = std::move(p.sentences);
    jobs_.erase(ticket);
    queue_->answer(ticket, std::move(sentences));
  }

  struct JobProgress {
    Sentences sentences;
    const Job* job;   // the Batcher keeps it alive until its result is answered
    int64_t running;  // lines still decoding
    int64_t source_tokens, target_tokens;
    int64_t length_limited;  // lines that stopped at the length limit
  };
  TranslationService& service_;
  DecodeOptions options_;
  std::unique_ptr<runtime::Search> search_;
  JobQueue* queue_ = nullptr;
  std::map<uint64_t, JobProgress> jobs_;                    // by ticket
  std::map<uint64_t, std::pair<uint64_t, size_t>> row_of_;  // search ticket -> (job ticket, line)
  uint64_t next_row_ = 0;
  int64_t step_rows_ = 0;
  std::chrono::steady_clock::time_point step_start_;
};

std::unique_ptr<StepStream> TranslationService::make_stream() { return std::make_unique<SearchStream>(*this); }

SentenceResult TranslationService::finish_sentence(const PreparedLine& line, const std::vector<int64_t>& hyp,
                                                   bool attention, const DecodeOptions& options) const {
  SentenceResult r;
  r.translation = engine().finish(line, hyp);
  r.length_limited = engine().reached_limit(line, hyp, options);
  r.placeholders_lost = data::missing_placeholders(line.text.line(), r.translation);
  if (attention) r.attention_json = attention_json(line, hyp);
  return r;
}

std::string TranslationService::attention_json(const PreparedLine& line, const std::vector<int64_t>& hyp) const {
  const std::vector<int64_t>& src = line.ids;
  json j;
  if (src.empty()) {
    j = {{"source", json::array()}, {"target_in", json::array()}, {"target_out", json::array()},
         {"encoder_self", json::array()}, {"decoder_self", json::array()}, {"cross", json::array()}};
    return j.dump();
  }
  // The translation's own ids, as decoding produced them: one teacher-forced
  // pass, no second decode.
  std::vector<int64_t> tgt_in{kStartId};
  tgt_in.insert(tgt_in.end(), hyp.begin(), hyp.end());
  std::vector<int64_t> tgt_out = hyp;
  tgt_out.push_back(kEndId);
  const runtime::AttentionMaps maps = engine().attention(line, hyp);
  const auto shown = [&](std::vector<std::string> pieces) {
    for (std::string& p : pieces) p = line.text.shown(p);
    return pieces;
  };
  j["source"] = shown(engine().source_tokenizer().pieces(src));
  j["target_in"] = shown(engine().target_tokenizer().pieces(tgt_in));
  j["target_out"] = shown(engine().target_tokenizer().pieces(tgt_out));
  j["encoder_self"] = nested(maps.encoder_self);
  j["decoder_self"] = nested(maps.decoder_self);
  j["cross"] = nested(maps.cross);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::vector<std::string> example_sentences(const std::string& path, size_t count) {
  constexpr size_t kRead = 2000, kShortest = 4, kLongest = 24;
  std::ifstream in(path, std::ios::binary);
  std::vector<std::string> fit, with_placeholder;
  std::string line;
  for (size_t n = 0; n < kRead && std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (utf8::first_invalid(line) != std::string::npos) continue;
    const size_t chars = utf8::length(line);
    if (chars < kShortest || chars > kLongest || std::find(fit.begin(), fit.end(), line) != fit.end()) continue;
    fit.push_back(line);
    if (!data::find_placeholders(line).empty()) with_placeholder.push_back(line);
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < count && i < fit.size(); ++i) out.push_back(fit[i * fit.size() / count]);
  // A model that protects placeholders shows it best on one.
  if (!with_placeholder.empty() && !out.empty() &&
      std::none_of(out.begin(), out.end(), [](const std::string& s) { return !data::find_placeholders(s).empty(); }))
    out.back() = with_placeholder.front();
  return out;
}

std::string TranslationService::info_json() const {
  const ModelShape& o = engine().model().shape();
  const Translator::Impl& t = m_.translator->impl();
  return json{{"model", t.name()},
              {"encoder_layers", o.encoder_layers},
              {"decoder_layers", o.decoder_layers},
              {"heads", o.heads},
              {"d_model", o.d_model},
              {"max_positions", o.max_positions},
              {"attention", name_of(t.attention)},
              {"device", t.device == Device::kCuda ? "cuda" : "cpu"},
              // Sentinels in the attention tokens are shown as the line's placeholders.
              {"protect_placeholders", m_.decode.protect_placeholders},
              {"examples", m_.examples}}
      .dump();
}

}  // namespace nmt::serve
