#include "ops/attention/backend.h"

#include "util/errors.h"

namespace nmt::ops {

std::vector<std::string> backend_names() { return kAttentionBackends.names(); }

std::string backend_choices() { return kAttentionBackends.listed(); }

AttentionBackend parse_backend(const std::string& name) {
  if (const std::optional<AttentionBackend> b = kAttentionBackends.find(name)) return *b;
  throw InputError("attention backend '" + name + "' is not one of: " + backend_choices());
}

std::string backend_name(AttentionBackend backend) { return kAttentionBackends.name(backend); }

}  // namespace nmt::ops
