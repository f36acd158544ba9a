// The choices of nmt's options, typed: where a model runs, its dense layers'
// arithmetic, its attention kernels; and their names, as the command line,
// configs and Python spell them.
#pragma once

#include <string>

#include "nmt/export.h"

namespace nmt {

// Where the model runs. kCuda needs the nmt program (it carries LibTorch and
// the CUDA kernels); the runtime alone runs on the CPU. kAuto: a GPU where
// the program has one, else the CPU.
enum class Device { kCpu, kCuda, kAuto };
// The dense layers' arithmetic (attention, LayerNorm and the residual
// stream stay float32): kInt8 is 2-3x as fast as kFloat32 within about 0.1
// BLEU; kBf16 pays where the CPU has AVX512-BF16; kAuto: int8 where the CPU
// has AVX2 or AVX-512 VNNI, else float32.
enum class ComputeType { kFloat32, kBf16, kInt8, kAuto };
// The attention kernels: kFlash (the default) and kNaive are the runtime's;
// kTorch is LibTorch's own, the reference, which needs the nmt program.
enum class AttentionBackend { kTorch, kNaive, kFlash };

// The names the command line, configs and Python use ("cpu", "int8",
// "flash"), and back. Parsing an unknown name throws InputError
// "WHAT: 'x' is not one of: a | b | c".
NMT_API Device parse_device(const std::string& name, const std::string& what = "device");
NMT_API ComputeType parse_compute_type(const std::string& name, const std::string& what = "compute_type");
NMT_API AttentionBackend parse_attention(const std::string& name, const std::string& what = "attention");
NMT_API const char* name_of(Device device);
NMT_API const char* name_of(ComputeType type);
NMT_API const char* name_of(AttentionBackend backend);

}  // namespace nmt
