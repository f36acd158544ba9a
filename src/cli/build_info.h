// What this nmt was built with and what it finds at run time (`nmt --version`):
// LibTorch, the CUDA kernels and their architectures, the NCCL process
// group, the CPU kernels' instruction set.
#pragma once

#include <string>

namespace nmt::cli {

std::string build_info();

}  // namespace nmt::cli
