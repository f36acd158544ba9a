#pragma once

#include <c10/core/Device.h>

#include <string>

namespace nmt {

// "cpu" | "cuda" | "auto" -> a device; InputError (exit 2) when CUDA is asked
// for but this build or machine has none. `what` names the flag or key.
c10::Device resolve_device(const std::string& name, const std::string& what);

// threads <= 0: all cores. LibTorch's default here is a single thread.
int64_t set_threads(int64_t threads);

}  // namespace nmt
