#include "serve/request.h"

#include <nlohmann/json.hpp>

#include "util/utf8.h"

namespace nmt::serve {

namespace {

using nlohmann::json;

std::string type_name(const json& v) { return v.type_name(); }

std::string checked_line(const json& v, const std::string& field) {
  if (!v.is_string()) throw RequestError(400, field + ": expected a string, got " + type_name(v));
  const std::string& s = v.get_ref<const std::string&>();
  // The JSON reader has checked the encoding; a NUL (\u0000) would cut the
  // line short in the tokenizer, which reads C strings.
  if (s.find('\0') != std::string::npos) throw RequestError(400, field + ": contains a NUL character");
  return s;
}

}  // namespace

TranslateRequest parse_translate_request(const std::string& body, const RequestLimits& limits) {
  if (body.empty()) throw RequestError(400, "body: empty; expected a JSON object like {\"text\": [\"…\"]}");
  const size_t bad = utf8::first_invalid(body);
  if (bad != std::string::npos)
    throw RequestError(400, "body: not valid UTF-8 at byte " + std::to_string(bad));
  json doc;
  try {
    doc = json::parse(body);
  } catch (const json::parse_error& e) {
    throw RequestError(400, "body: not valid JSON at byte " + std::to_string(e.byte));
  }
  if (!doc.is_object()) throw RequestError(400, "body: expected a JSON object, got " + type_name(doc));
  TranslateRequest r;
  for (const auto& [key, value] : doc.items()) {
    if (key == "text") {
      if (value.is_string()) {
        r.text.push_back(checked_line(value, "text"));
      } else if (value.is_array()) {
        if (static_cast<int64_t>(value.size()) > limits.max_sentences)
          throw RequestError(413, "text: " + std::to_string(value.size()) + " sentences, more than the " +
                                      std::to_string(limits.max_sentences) + " a request may hold");
        for (size_t i = 0; i < value.size(); ++i)
          r.text.push_back(checked_line(value[i], "text[" + std::to_string(i) + "]"));
      } else {
        throw RequestError(400, "text: expected an array of strings, got " + type_name(value));
      }
    } else if (key == "beam") {
      if (!value.is_number_integer())
        throw RequestError(400, "beam: expected an integer 0.." + std::to_string(limits.max_beam) +
                                    " (0 and 1: greedy), got " + (value.is_number() ? value.dump() : type_name(value)));
      const int64_t beam = value.get<int64_t>();
      if (beam < 0 || beam > limits.max_beam)
        throw RequestError(400, "beam: " + std::to_string(beam) + " is not in 0.." + std::to_string(limits.max_beam) +
                                    " (0 and 1: greedy)");
      r.beam = beam;
    } else if (key == "attention") {
      if (!value.is_boolean()) throw RequestError(400, "attention: expected true or false, got " + type_name(value));
      r.attention = value.get<bool>();
    } else {
      throw RequestError(400, "unknown field \"" + key + "\" (known: text, beam, attention)");
    }
  }
  if (!doc.contains("text")) throw RequestError(400, "text: missing; expected an array of strings");
  if (r.text.empty()) throw RequestError(400, "text: empty; give at least one sentence");
  return r;
}

std::vector<std::string> split_lines(const TranslateRequest& request, const RequestLimits& limits,
                                     std::vector<size_t>* owner) {
  std::vector<std::string> lines;
  owner->clear();
  for (size_t i = 0; i < request.text.size(); ++i) {
    const std::string& text = request.text[i];
    if (request.attention && text.find('\n') != std::string::npos)
      throw RequestError(400, "text[" + std::to_string(i) + "]: has line breaks, and attention maps are one per "
                              "line: send its lines as texts of their own");
    size_t at = 0;
    for (;;) {
      const size_t end = text.find('\n', at);
      std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
      if (end != std::string::npos && !line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
      owner->push_back(i);
      if (end == std::string::npos) break;
      at = end + 1;
    }
  }
  if (static_cast<int64_t>(lines.size()) > limits.max_sentences)
    throw RequestError(413, "text: " + std::to_string(lines.size()) + " lines (line breaks split a text), more than "
                            "the " + std::to_string(limits.max_sentences) + " a request may hold");
  return lines;
}

std::vector<std::string> join_lines(const std::vector<std::string>& translations, const std::vector<size_t>& owner,
                                    size_t texts) {
  std::vector<std::string> out(texts);
  std::vector<bool> started(texts, false);
  for (size_t k = 0; k < translations.size(); ++k) {
    std::string& t = out[owner[k]];
    if (started[owner[k]]) t += '\n';
    t += translations[k];
    started[owner[k]] = true;
  }
  return out;
}

std::string error_json(int status, const std::string& message) {
  return json{{"error", {{"code", status}, {"message", message}}}}.dump();
}

}  // namespace nmt::serve
