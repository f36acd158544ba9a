#pragma once

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <functional>
#include <string>

#include "util/device_choices.h"

namespace nmt {

// cpu, cuda, or auto (cuda when available) -> a device; InputError (exit 2)
// when CUDA is asked for but this build or machine has none. `what` names the
// flag or key.
c10::Device resolve_device(DeviceKind kind, const std::string& what);

// float32, bf16, or auto -> the dtype matrix multiplies run in on `device`.
// auto is bf16 on a GPU. On a CPU that can run bf16 products natively
// (AVX512-BF16 or AMX), whether they pay depends on the CPU and its float32
// kernels: with AVX512-BF16 alone bf16 trained 1.1-1.3x faster than float32
// on some Xeons and 1.5-1.75x slower on an Emerald Rapids Xeon without AMX
// (docs/bench/train.md). So auto asks `bf16_speedup` (how many times faster
// a bf16 product is than a float32 one here, casts included) and takes bf16
// from kBf16TrainingPays up; without it, bf16. The bar is high because the
// rest of a bf16 step costs more than its products gain: on that Xeon, a
// product of configs/real.yaml's shape ran 1.12x as fast in bf16 and the
// step 0.67x as fast, so products must be about 1.6x as fast to break even.
// A resumed run passes `kept`, the precision it trained in ("float32" or
// "bf16", from its checkpoint; "" for none): auto keeps that, without
// measuring, where `device` computes in it, since a new measurement (on a
// busy machine, or near the threshold) could pick the other and change the
// arithmetic mid-run.
// InputError (naming `what`) for bf16 on a CPU without AVX512-BF16 or AMX,
// where LibTorch's bf16 matrix multiplies would be slower than float32.
inline constexpr double kBf16TrainingPays = 1.6;
c10::ScalarType resolve_precision(Precision precision, const c10::Device& device,
                                  const std::string& what, const std::function<double()>& bf16_speedup = {},
                                  const std::string& kept = "");
// "float32" or "bf16": the name train.precision and state.yaml give `dtype`.
const char* precision_name(c10::ScalarType dtype);

// How many times faster [rows, inner] . [inner, outer] runs in bf16 than in
// float32 on this CPU, both operands cast from float32 as a training step's
// products are (median of a few timed samples; about 0.3 s).
double bf16_product_speedup(int64_t rows, int64_t inner, int64_t outer);

// threads <= 0: all cores. LibTorch's default here is a single thread.
int64_t set_threads(int64_t threads);

// Gives the C heap's free pages back to the system (glibc's malloc_trim;
// nothing elsewhere): tensors freed after a burst otherwise stay resident.
void release_free_host_memory();

}  // namespace nmt
