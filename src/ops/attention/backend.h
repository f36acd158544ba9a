// The attention backends, listed once. Config choices, command-line checks,
// benchmark defaults and test parameters all derive from kAttentionBackends.
// Plain C++: no LibTorch.
#pragma once

#include <string>
#include <vector>

#include "nmt/types.h"
#include "util/choices.h"

namespace nmt::ops {

// The public nmt::AttentionBackend.
using AttentionBackend = nmt::AttentionBackend;

inline constexpr ChoiceList<AttentionBackend, 3> kAttentionBackends{{{
    {AttentionBackend::kTorch, "torch"},  // LibTorch's built-in scaled-dot-product attention
    {AttentionBackend::kNaive, "naive"},  // materialized [B,H,Tq,Tk] scores, plain loops
    {AttentionBackend::kFlash, "flash"},  // FlashAttention-2 tiling, O(T) extra memory
}}};

// "torch", "naive", "flash" in kAttentionBackends' order.
std::vector<std::string> backend_names();
// "torch | naive | flash", for messages.
std::string backend_choices();
// Parses a name; throws InputError naming the choices otherwise.
AttentionBackend parse_backend(const std::string& name);
std::string backend_name(AttentionBackend backend);

}  // namespace nmt::ops
