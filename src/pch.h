// Precompiled once per target: the LibTorch headers dominate compile time.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn.h>
#include <torch/optim.h>
#include <torch/serialize.h>

#include <spdlog/spdlog.h>

#include <string>
#include <vector>
