// The public choices' names (include/nmt/types.h), from the one list of each.
#include "nmt/types.h"

#include "ops/attention/backend.h"
#include "ops/linear/packed_linear.h"
#include "util/device_choices.h"

namespace nmt {

Device parse_device(const std::string& name, const std::string& what) { return kDeviceChoices.parse(name, what); }
ComputeType parse_compute_type(const std::string& name, const std::string& what) {
  return ops::kComputeTypeChoices.parse(name, what);
}
AttentionBackend parse_attention(const std::string& name, const std::string& what) {
  return ops::kAttentionBackends.parse(name, what);
}
const char* name_of(Device device) { return kDeviceChoices.name(device); }
const char* name_of(ComputeType type) { return ops::kComputeTypeChoices.name(type); }
const char* name_of(AttentionBackend backend) { return ops::kAttentionBackends.name(backend); }

}  // namespace nmt
