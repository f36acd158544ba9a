// The device and precision choices (attention.device, --device,
// train.precision), without LibTorch: the config reads them, util/device.h
// resolves them.
#pragma once

#include "nmt/types.h"
#include "util/choices.h"

namespace nmt {

// attention.device and --device (the public nmt::Device).
using DeviceKind = Device;
inline constexpr ChoiceList<DeviceKind, 3> kDeviceChoices{{{
    {DeviceKind::kCpu, "cpu"}, {DeviceKind::kCuda, "cuda"}, {DeviceKind::kAuto, "auto"}}}};

// train.precision: the dtype of the matrix multiplies in training.
enum class Precision { kFloat32, kBf16, kAuto };
inline constexpr ChoiceList<Precision, 3> kPrecisionChoices{{{
    {Precision::kFloat32, "float32"}, {Precision::kBf16, "bf16"}, {Precision::kAuto, "auto"}}}};

}  // namespace nmt
