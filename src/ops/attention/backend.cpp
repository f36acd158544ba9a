#include "ops/attention/backend.h"

#include "util/errors.h"

namespace nmt::ops {

std::vector<std::string> backend_names() {
  std::vector<std::string> names;
  for (const auto& b : kAttentionBackends) names.emplace_back(b.name);
  return names;
}

std::string backend_choices() {
  std::string out;
  for (const auto& b : kAttentionBackends) out += (out.empty() ? "" : " | ") + std::string(b.name);
  return out;
}

AttentionBackend parse_backend(const std::string& name) {
  for (const auto& b : kAttentionBackends)
    if (name == b.name) return b.id;
  throw InputError("attention backend '" + name + "' is not one of: " + backend_choices());
}

std::string backend_name(AttentionBackend backend) {
  for (const auto& b : kAttentionBackends)
    if (b.id == backend) return b.name;
  return "?";
}

}  // namespace nmt::ops
