#include "serve/translation_service.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "decode/continuous_greedy.h"
#include "ops/attention/backend.h"
#include "tokenizer/tokenizer.h"
#include "util/thread_env.h"

namespace nmt::serve {

namespace {

using nlohmann::json;

// maps: per layer [1, H, Tq, Tk] -> [L][H][Tq][Tk], rounded to 4 decimals
// (plenty for a heatmap, a third of the bytes).
json nested(const std::vector<torch::Tensor>& maps) {
  json layers = json::array();
  for (const torch::Tensor& layer : maps) {
    const torch::Tensor t = layer[0].to(torch::kCPU, torch::kFloat).contiguous();  // [H, Tq, Tk]
    const auto a = t.accessor<float, 3>();
    json heads = json::array();
    for (int64_t h = 0; h < t.size(0); ++h) {
      json rows = json::array();
      for (int64_t i = 0; i < t.size(1); ++i) {
        json row = json::array();
        for (int64_t j = 0; j < t.size(2); ++j) row.push_back(std::round(a[h][i][j] * 1e4) / 1e4);
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
  job.beam = request.beam <= 1 ? 0 : request.beam;
  job.attention = request.attention;
  for (size_t i = 0; i < job.lines.size(); ++i) {
    // Cut as every entry point cuts (fit_source); the answer names the line.
    std::vector<int64_t> ids = m_.src_tok->encode(SourceText(job.lines[i], m_.decode).text());
    if (fit_source(ids, m_.model) > static_cast<int64_t>(ids.size())) job.cut.push_back(i);
    job.tokens.push_back(static_cast<int64_t>(ids.size()));
  }
  return job;
}

std::vector<Sentences> TranslationService::run_batch(const std::vector<const Job*>& jobs) {
  const auto start = std::chrono::steady_clock::now();
  // One call over every line of the batch: translate_lines sorts them by
  // length and decodes them in sub-batches, as `nmt translate` does.
  std::vector<std::string> lines;
  int64_t source_tokens = 0;
  for (const Job* job : jobs) {
    lines.insert(lines.end(), job->lines.begin(), job->lines.end());
    source_tokens += job->total_tokens();
  }
  DecodeOptions options = worker_options(jobs.front()->beam);  // the Batcher groups jobs by beam
  if (m_.workers == 1 && m_.device.is_cpu()) {
    // The only worker: the batch is cut into one sub-batch per thread (of
    // similar lengths: translate_lines sorts first), or its decoding would
    // run on one core while the others idle.
    const int64_t workers = std::max<int64_t>(1, options.parallel_batches > 0 ? options.parallel_batches
                                                                               : at::get_num_threads());
    const int64_t n = static_cast<int64_t>(lines.size());
    options.batch_size = std::max<int64_t>(1, std::min(options.batch_size, (n + workers - 1) / workers));
  }
  const std::vector<std::string> out = translate_lines(m_.model, *m_.src_tok, *m_.tgt_tok, lines, options, m_.device);
  std::vector<Sentences> results;
  size_t k = 0;
  int64_t target_tokens = 0;
  for (const Job* job : jobs) {
    Sentences r(job->lines.size());
    for (size_t i = 0; i < job->lines.size(); ++i, ++k) {
      r[i].translation = out[k];
      target_tokens += static_cast<int64_t>(m_.tgt_tok->encode(out[k]).size());
      if (job->attention) r[i].attention_json = attention_json(job->lines[i], options);
    }
    results.push_back(std::move(r));
  }
  metrics_.batch(static_cast<int64_t>(lines.size()),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  metrics_.translated(static_cast<int64_t>(lines.size()), source_tokens, target_tokens);
  return results;
}

DecodeOptions TranslationService::worker_options(int64_t beam) const {
  DecodeOptions options = m_.decode;
  options.beam = beam;
  if (m_.workers > 1) {
    // One of several workers: this batch gets this thread alone.
    at::set_num_threads(1);
    options.parallel_batches = 1;
  }
  return options;
}

// A job's lines as rows of a ContinuousGreedy; the job is reported when its
// last line ends (a job of empty lines at the next step).
class TranslationService::GreedyStream : public StepStream {
 public:
  explicit GreedyStream(TranslationService& service)
      : service_(service), options_(service.worker_options(0)),
        decoder_(service.m_.model, options_, service.m_.device) {}

  void add(const Job& job, uint64_t ticket) override {
    Pending p{std::vector<SentenceResult>(job.lines.size()), {}, 0, job.attention ? &job : nullptr, 0, 0};
    std::vector<std::vector<int64_t>> sources, owed;
    std::vector<uint64_t> rows;
    for (size_t i = 0; i < job.lines.size(); ++i) {
      p.texts.emplace_back(job.lines[i], options_);
      std::vector<int64_t> ids = service_.m_.src_tok->encode(p.texts.back().text());
      if (ids.empty()) continue;  // translates to "", as translate_lines has it
      fit_source(ids, service_.m_.model);
      p.source_tokens += static_cast<int64_t>(ids.size());
      sources.push_back(std::move(ids));
      owed.push_back(p.texts.back().owed());
      rows.push_back(next_row_);
      row_of_[next_row_++] = {ticket, i};
      ++p.running;
    }
    jobs_[ticket] = std::move(p);
    if (sources.empty()) {
      done_.push_back(ticket);
      return;
    }
    decoder_.add(sources, rows, owed);
  }

  std::vector<std::pair<uint64_t, Sentences>> step() override {
    const auto start = std::chrono::steady_clock::now();
    const int64_t rows = decoder_.rows();
    std::vector<std::pair<uint64_t, std::vector<int64_t>>> ended;
    if (rows > 0) ended = decoder_.step();
    if (rows > 0)
      service_.metrics_.batch(rows, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    for (auto& [row, ids] : ended) {
      const auto [ticket, line] = row_of_.at(row);
      row_of_.erase(row);
      Pending& p = jobs_.at(ticket);
      p.sentences[line].translation = p.texts[line].finish(service_.m_.tgt_tok->decode(ids));
      p.target_tokens += static_cast<int64_t>(ids.size());
      if (--p.running == 0) done_.push_back(ticket);
    }
    std::vector<std::pair<uint64_t, Sentences>> finished;
    for (uint64_t ticket : done_) {
      Pending& p = jobs_.at(ticket);
      if (p.attention_job)
        for (size_t i = 0; i < p.sentences.size(); ++i)
          p.sentences[i].attention_json = service_.attention_json(p.attention_job->lines[i], options_);
      service_.metrics_.translated(static_cast<int64_t>(p.sentences.size()), p.source_tokens, p.target_tokens);
      finished.emplace_back(ticket, std::move(p.sentences));
      jobs_.erase(ticket);
    }
    done_.clear();
    return finished;
  }

  int64_t source_tokens() const override { return decoder_.source_tokens(); }
  bool idle() const override { return jobs_.empty(); }

 private:
  struct Pending {
    Sentences sentences;
    std::vector<SourceText> texts;  // what each line's source tokens were made from
    int64_t running;          // lines still decoding
    const Job* attention_job;  // set when it asked for attention (the Batcher keeps the job alive)
    int64_t source_tokens, target_tokens;
  };
  TranslationService& service_;
  DecodeOptions options_;
  ContinuousGreedy decoder_;
  std::map<uint64_t, Pending> jobs_;                          // by ticket
  std::map<uint64_t, std::pair<uint64_t, size_t>> row_of_;  // decoder ticket -> (job ticket, line)
  uint64_t next_row_ = 0;
  std::vector<uint64_t> done_;
};

std::unique_ptr<StepStream> TranslationService::make_stream() { return std::make_unique<GreedyStream>(*this); }

std::string TranslationService::attention_json(const std::string& line, const DecodeOptions& options) {
  torch::NoGradGuard no_grad;
  const SourceText text(line, options);
  std::vector<int64_t> src = m_.src_tok->encode(text.text());
  fit_source(src, m_.model);  // the map of what was translated
  json j;
  if (src.empty()) {
    j = {{"source", json::array()}, {"target_in", json::array()}, {"target_out", json::array()},
         {"encoder_self", json::array()}, {"decoder_self", json::array()}, {"cross", json::array()}};
    return j.dump();
  }
  // The same decode as translate_lines' (a sentence's result does not depend
  // on its batch), for the token ids the strings no longer carry.
  const std::vector<int64_t> hyp = decode(m_.model, {src}, options, m_.device, {text.owed()})[0];
  std::vector<int64_t> tgt_in{kStartId};
  tgt_in.insert(tgt_in.end(), hyp.begin(), hyp.end());
  std::vector<int64_t> tgt_out = hyp;
  tgt_out.push_back(kEndId);
  auto [src_t, src_len] = make_source_batch({src});
  const auto long_opts = torch::TensorOptions(torch::kLong).device(m_.device);
  const torch::Tensor tgt_t = torch::tensor(tgt_in, long_opts).unsqueeze(0);
  const AttentionMaps maps = m_.model->attention_maps(src_t.to(m_.device), src_len.to(m_.device), tgt_t,
                                                      torch::full({1}, tgt_t.size(1), long_opts));
  j["source"] = m_.src_tok->pieces(src);
  j["target_in"] = m_.tgt_tok->pieces(tgt_in);
  j["target_out"] = m_.tgt_tok->pieces(tgt_out);
  j["encoder_self"] = nested(maps.encoder_self);
  j["decoder_self"] = nested(maps.decoder_self);
  j["cross"] = nested(maps.cross);
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string TranslationService::info_json() const {
  const TransformerOptions& o = m_.model->options();
  return json{{"model", m_.description},
              {"encoder_layers", o.encoder_layers()},
              {"decoder_layers", o.decoder_layers()},
              {"heads", o.heads()},
              {"d_model", o.d_model()},
              {"max_positions", o.max_positions()},
              {"attention", ops::backend_name(m_.model->attention_backend())},
              {"device", m_.device.str()}}
      .dump();
}

}  // namespace nmt::serve
