// A /v1/translate request body, read strictly: every way it can be wrong
// gets a RequestError naming the field, with the HTTP status to answer.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

namespace nmt::serve {

// An answer other than 200: status (4xx, or 503) and a one-line message.
class RequestError : public std::runtime_error {
 public:
  RequestError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct RequestLimits {
  int64_t max_sentences = 64;  // per request (413 beyond)
  int64_t max_beam = 8;
};

struct TranslateRequest {
  std::vector<std::string> text;
  // Not given: the service's default (decode.beam); 0 or 1: greedy (0 as
  // on the command line and in configs), K >= 2 a beam of K.
  std::optional<int64_t> beam;
  bool attention = false;
};

// body: {"text": ["…", …] | "…", "beam": 0..max_beam, "attention": bool}.
// Unknown fields are refused (a misspelt "beam" would otherwise be ignored
// silently).
TranslateRequest parse_translate_request(const std::string& body, const RequestLimits& limits);

// The beam a request is decoded with, as a Job counts it (0 = greedy): its
// own "beam", else the service's default (the checkpoint's decode.beam).
inline int64_t job_beam(const TranslateRequest& request, int64_t default_beam) {
  const int64_t beam = request.beam.value_or(default_beam);
  return beam <= 1 ? 0 : beam;
}

// A text with line breaks is translated line by line and its translations
// joined with "\n", as translation services do: the model reads one sentence
// a line. split_lines turns the request's texts into the lines to translate
// (a "\r" before a "\n" dropped), owner[k] naming the text of line k; with
// attention asked, a text with line breaks is a 400 (its maps are one per
// line: send its lines as texts of their own); more lines than
// max_sentences, a 413. join_lines puts the translations back together.
std::vector<std::string> split_lines(const TranslateRequest& request, const RequestLimits& limits,
                                     std::vector<size_t>* owner);
std::vector<std::string> join_lines(const std::vector<std::string>& translations, const std::vector<size_t>& owner,
                                    size_t texts);

// {"error": {"code": status, "message": message}}
std::string error_json(int status, const std::string& message);

}  // namespace nmt::serve
