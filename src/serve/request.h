// A /v1/translate request body, read strictly: every way it can be wrong
// gets a RequestError naming the field, with the HTTP status to answer.
#pragma once

#include <cstdint>
#include <stdexcept>
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
  int64_t beam = 1;  // 1 = greedy
  bool attention = false;
};

// body: {"text": ["…", …] | "…", "beam": 1..max_beam, "attention": bool}.
// Unknown fields are refused (a misspelt "beam" would otherwise be ignored
// silently).
TranslateRequest parse_translate_request(const std::string& body, const RequestLimits& limits);

// {"error": {"code": status, "message": message}}
std::string error_json(int status, const std::string& message);

}  // namespace nmt::serve
