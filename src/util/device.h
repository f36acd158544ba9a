#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "util/device_choices.h"

namespace nmt {

// cpu, cuda, or auto (cuda when available) -> a device; InputError (exit 2)
// when CUDA is asked for but this build or machine has none. `what` names the
// flag or key.
c10::Device resolve_device(DeviceKind kind, const std::string& what);
// The same from a name (InputError naming `what` for any other).
c10::Device resolve_device(const std::string& name, const std::string& what);

// float32, bf16, or auto (bf16 where it is fast) -> the dtype matrix
// multiplies run in on `device`.
// InputError (naming `what`) for bf16 on a CPU without AVX512-BF16 or AMX,
// where LibTorch's bf16 matrix multiplies would be slower than float32.
c10::ScalarType resolve_precision(const std::string& precision, const c10::Device& device,
                                  const std::string& what);

// threads <= 0: all cores. LibTorch's default here is a single thread.
int64_t set_threads(int64_t threads);

// Gives the C heap's free pages back to the system (glibc's malloc_trim;
// nothing elsewhere): tensors freed after a burst otherwise stay resident.
void release_free_host_memory();

}  // namespace nmt
