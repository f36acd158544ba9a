// model.safetensors' reader (runtime/safetensors.h): the runtime maps a
// checkpoint's weights from it, so any file must either read as tensors
// that lie wholly inside it, without overlapping, or be an InputError; any
// other exception escapes and counts as a crash. Property: what reads is
// written back by the writer checkpoints use and reads again to the same
// shapes and bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "fuzz_util.h"
#include "runtime/safetensors.h"
#include "util/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace nmt;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::map<std::string, runtime::TensorView> tensors;
  try {
    tensors = runtime::read_safetensors(bytes, "model.safetensors");
  } catch (const InputError&) {
    return 0;
  }
  const char* begin = bytes.data();
  const char* end = bytes.data() + bytes.size();
  for (const auto& [name, v] : tensors) {
    const char* first = reinterpret_cast<const char*>(v.data);
    fuzz::check(v.numel() == 0 || (first >= begin && first + v.numel() * sizeof(float) <= end),
                "tensor " + name + " lies outside the file");
  }
  const std::string written = runtime::write_safetensors(tensors, {{"format", "nmt"}});
  std::map<std::string, runtime::TensorView> again;
  try {
    again = runtime::read_safetensors(written, "written model.safetensors");
  } catch (const InputError& e) {
    fuzz::fail(std::string("write_safetensors() output does not read back: ") + e.what());
  }
  fuzz::check(again.size() == tensors.size(), "a tensor lost in writing");
  for (const auto& [name, v] : tensors) {
    const auto it = again.find(name);
    fuzz::check(it != again.end() && it->second.shape == v.shape, "tensor " + name + " written with another shape");
    fuzz::check(v.numel() == 0 || std::memcmp(it->second.data, v.data, v.numel() * sizeof(float)) == 0,
                "tensor " + name + " written with other bytes");
  }
  return 0;
}
