#include "data/placeholder_mask.h"

#include <cctype>
#include <map>

#include "data/placeholders.h"

namespace nmt::data {

namespace {

// "%2$lu" -> (2, "%lu"); "%s" -> (0, "%s"); not an argument ("%%", "%(name)s", "{0}"): (-1, "").
std::pair<int, std::string> printf_argument(const std::string& p) {
  PrintfArgument a;
  if (!parse_printf_argument(p, &a)) return {-1, ""};
  return {a.position, a.conversion};
}

// The sentinel number at s[i] (0: none), and its length in bytes.
int sentinel_at(const std::string& s, size_t i) {
  if (i + 2 >= s.size() || static_cast<unsigned char>(s[i]) != 0xEE) return 0;
  const unsigned c1 = static_cast<unsigned char>(s[i + 1]), c2 = static_cast<unsigned char>(s[i + 2]);
  if ((c1 & 0xC0) != 0x80 || (c2 & 0xC0) != 0x80) return 0;
  const int cp = static_cast<int>(((0xEu) << 12) | ((c1 & 0x3F) << 6) | (c2 & 0x3F));
  const int k = cp - 0xE000;
  return k >= 1 && k <= kMaxSentinels ? k : 0;
}

}  // namespace

MaskedSource mask_source(const std::string& line) {
  MaskedSource m;
  const auto spans = find_placeholder_spans(line);
  // Pass 1: the printf arguments, numbered as printf numbers them.
  std::vector<int> arg_of(spans.size(), -1);
  int next = 0, args = 0;
  for (size_t s = 0; s < spans.size(); ++s) {
    auto [n, conversion] = printf_argument(line.substr(spans[s].offset, spans[s].length));
    if (n < 0) continue;
    arg_of[s] = n > 0 ? n : ++next;
    args = std::max(args, arg_of[s]);
  }
  if (args > kMaxSentinels) {  // not a line to meddle with
    m.text = line;
    return m;
  }
  m.slots.resize(static_cast<size_t>(args));
  std::map<std::string, int> other;  // placeholder text -> its sentinel
  std::vector<int> id(spans.size(), 0);
  for (size_t s = 0; s < spans.size(); ++s) {
    const std::string text = line.substr(spans[s].offset, spans[s].length);
    const size_t at = spans[s].offset;
    const bool glued = at > 0 && (std::isalnum(static_cast<unsigned char>(line[at - 1])) ||
                                  (s > 0 && spans[s - 1].offset + spans[s - 1].length == at));
    if (arg_of[s] > 0) {
      MaskedSource::Slot& slot = m.slots[static_cast<size_t>(arg_of[s] - 1)];
      if (slot.text.empty()) slot = {text, arg_of[s], printf_argument(text).second, glued};
      id[s] = arg_of[s];
      continue;
    }
    auto it = other.find(text);
    if (it == other.end()) {
      if (m.slots.size() >= static_cast<size_t>(kMaxSentinels)) continue;  // left verbatim
      m.slots.push_back({text, 0, "", glued});
      it = other.emplace(text, static_cast<int>(m.slots.size())).first;
    }
    id[s] = it->second;
  }
  size_t at = 0;
  for (size_t s = 0; s < spans.size(); ++s) {
    if (id[s] == 0) continue;
    m.text += line.substr(at, spans[s].offset - at) + sentinel(id[s]);
    at = spans[s].offset + spans[s].length;
  }
  m.text += line.substr(at);
  return m;
}

std::string mask_target(const std::string& line, const MaskedSource& source) {
  std::map<std::string, int> other;
  for (size_t k = 0; k < source.slots.size(); ++k)
    if (source.slots[k].arg == 0 && !source.slots[k].text.empty()) other.emplace(source.slots[k].text, static_cast<int>(k + 1));
  std::string out;
  size_t at = 0;
  int next = 0;
  for (const auto& span : find_placeholder_spans(line)) {
    const std::string text = line.substr(span.offset, span.length);
    int k = 0;
    const auto [n, conversion] = printf_argument(text);
    if (n >= 0) {
      const int arg = n > 0 ? n : ++next;
      if (arg <= static_cast<int>(source.slots.size()) && source.slots[static_cast<size_t>(arg - 1)].arg == arg) k = arg;
    } else if (const auto it = other.find(text); it != other.end()) {
      k = it->second;
    }
    if (k == 0) continue;
    out += line.substr(at, span.offset - at) + sentinel(k);
    at = span.offset + span.length;
  }
  return out + line.substr(at);
}

std::pair<std::string, std::string> model_pair(const std::string& source, const std::string& target, bool protect) {
  if (!protect) return {source, target};
  MaskedSource masked = mask_source(source);
  std::string masked_target = mask_target(target, masked);
  return {std::move(masked.text), std::move(masked_target)};
}

std::vector<int> sentinels_in(const std::string& text) {
  std::vector<int> out;
  for (size_t i = 0; i < text.size(); ++i)
    if (const int k = sentinel_at(text, i); k > 0) out.push_back(k), i += 2;
  return out;
}

std::string restore_target(const std::string& translation, const MaskedSource& source) {
  // Are the printf arguments in order, each once? Then without positions.
  std::vector<int> order;
  for (size_t i = 0; i < translation.size(); ++i)
    if (const int k = sentinel_at(translation, i); k > 0 && k <= static_cast<int>(source.slots.size()) &&
                                                    source.slots[static_cast<size_t>(k - 1)].arg > 0)
      order.push_back(k);
  bool in_order = true;
  for (size_t j = 0; j < order.size(); ++j) in_order = in_order && order[j] == static_cast<int>(j + 1);
  std::string out;
  size_t placeholder_end = std::string::npos;  // where the last placeholder written ends in out
  for (size_t i = 0; i < translation.size();) {
    const int k = sentinel_at(translation, i);
    if (k == 0) {
      out += translation[i++];
      continue;
    }
    i += 3;
    if (k > static_cast<int>(source.slots.size())) continue;  // not the source's: dropped
    const MaskedSource::Slot& slot = source.slots[static_cast<size_t>(k - 1)];
    if (slot.text.empty()) continue;
    // Words' neighbours: conversions that print an argument, Python's and
    // brace fields, options; not "%%" or "%m" (a percent sign or message
    // glued to what it follows), markup or entities.
    const std::string kind = placeholder_kind(slot.text);
    const bool spaced = slot.arg > 0 || kind == "python" || kind == "brace" || kind == "option";
    const bool after_word = !out.empty() && (std::isalnum(static_cast<unsigned char>(out.back())) ||
                                             placeholder_end == out.size());
    if (after_word && !slot.glued && spaced) out += ' ';
    if (slot.arg > 0 && in_order) out += slot.conversion;
    else if (slot.arg > 0) out.append("%").append(std::to_string(slot.arg)).append("$").append(slot.conversion, 1);
    else out += slot.text;
    placeholder_end = out.size();
  }
  return out;
}

std::string show_sentinels(const std::string& text, const MaskedSource& source) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const int k = sentinel_at(text, i);
    if (k == 0) {
      out += text[i++];
      continue;
    }
    i += 3;
    const bool known = k <= static_cast<int>(source.slots.size()) && !source.slots[static_cast<size_t>(k - 1)].text.empty();
    out += known ? source.slots[static_cast<size_t>(k - 1)].text : "[#" + std::to_string(k) + "]";
  }
  return out;
}

}  // namespace nmt::data
