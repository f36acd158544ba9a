// The weights of a checkpoint as model.safetensors: a format any reader can
// take without LibTorch (Hugging Face's safetensors: an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the tensors' bytes back to back). Only float32 tensors are
// written and read here. The checkpoint's other files (config.yaml,
// state.yaml, the tokenizers) are torch-free already; model.pt stays
// beside it for LibTorch's own loading (optimizer state, resume).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace nmt::runtime {

// A float32 tensor in someone else's memory, row-major.
struct TensorView {
  std::vector<int64_t> shape;
  const float* data = nullptr;
  int64_t numel() const;
};

// bytes: a whole model.safetensors file; name: the file, for messages.
// Returns every tensor as a view into `bytes` (which must outlive them).
// InputError naming the file and what is wrong for anything but a
// well-formed file of float32 tensors (a truncated header or body,
// overlapping or out-of-range byte ranges, a shape that disagrees with its
// bytes, another dtype).
std::map<std::string, TensorView> read_safetensors(const std::string& bytes, const std::string& name);

// The file's bytes for `tensors` (name -> view), in name order, each
// tensor's data 64-byte aligned within the data section; `metadata` goes
// into the header's "__metadata__" (strings only, as the format wants).
std::string write_safetensors(const std::map<std::string, TensorView>& tensors,
                              const std::map<std::string, std::string>& metadata = {});

}  // namespace nmt::runtime
