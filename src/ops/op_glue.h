// Helpers shared by the LibTorch glue of the fused ops: typed data pointers
// (bf16 tensors as the kernels' bf16), dropout coordinates kept in an
// autograd context, and (in a build with CUDA) the switch and launch helper
// of their GPU kernels.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/csrc/autograd/custom_function.h>

#include <atomic>
#include <cstdlib>
#include <string_view>
#include <type_traits>

#include "ops/bf16.h"
#include "ops/random/dropout.h"

#ifdef NMT_WITH_CUDA
struct CUstream_st;
#endif

namespace nmt::ops::glue {

// The gradient buffer of a parameter p that a backward may add into itself
// (the optimizer's flat one): p's .grad when p is a leaf with a contiguous
// gradient of its own dtype, sizes and device; otherwise undefined, and the
// backward returns its gradient to autograd. Read in the forward.
inline at::Tensor grad_buffer(const at::Tensor& p) {
  if (!p.is_leaf()) return {};  // (a non-leaf's grad() warns)
  const at::Tensor& g = p.grad();
  if (!g.defined() || g.scalar_type() != p.scalar_type() || !g.is_contiguous() || g.sizes() != p.sizes() ||
      g.device() != p.device())
    return {};
  return g;
}

template <typename U>
U* data(const at::Tensor& t) {
  if constexpr (std::is_same_v<U, bf16>) {
    TORCH_CHECK(t.scalar_type() == at::kBFloat16, "expected a bfloat16 tensor, got ", t.scalar_type());
    static_assert(sizeof(at::BFloat16) == sizeof(bf16));
    return reinterpret_cast<bf16*>(t.data_ptr<at::BFloat16>());
  } else {
    return t.data_ptr<U>();
  }
}

// The dtype pairs the fused CPU ops run in, as f(T{}, U{}): T the residual
// stream's (and the parameters'), U the matrix side's: float/float,
// double/double, float/bf16. `op` names the op in the error for any other.
template <typename F>
void dispatch_stream_side(const char* op, at::ScalarType stream, at::ScalarType side, F&& f) {
  if (stream == at::kFloat && side == at::kFloat) return f(float{}, float{});
  if (stream == at::kDouble && side == at::kDouble) return f(double{}, double{});
  if (stream == at::kFloat && side == at::kBFloat16) return f(float{}, bf16{});
  TORCH_CHECK(false, op, ": unsupported dtypes ", stream, " / ", side);
}

inline void save_dropout(torch::autograd::AutogradContext* ctx, const Dropout& d) {
  ctx->saved_data["dropout_p"] = d.p;
  ctx->saved_data["dropout_seed"] = static_cast<int64_t>(d.seed);
  ctx->saved_data["dropout_step"] = d.step;
  ctx->saved_data["dropout_site"] = d.site;
  ctx->saved_data["dropout_first_row"] = d.first_row;
  if (d.row_starts.defined()) ctx->saved_data["dropout_row_starts"] = d.row_starts;
}

inline Dropout load_dropout(torch::autograd::AutogradContext* ctx) {
  Dropout d;
  d.p = ctx->saved_data["dropout_p"].toDouble();
  d.seed = static_cast<uint64_t>(ctx->saved_data["dropout_seed"].toInt());
  d.step = ctx->saved_data["dropout_step"].toInt();
  d.site = ctx->saved_data["dropout_site"].toInt();
  d.first_row = ctx->saved_data["dropout_first_row"].toInt();
  if (ctx->saved_data.count("dropout_row_starts") != 0) d.row_starts = ctx->saved_data["dropout_row_starts"].toTensor();
  return d;
}

// Whether tensors on a GPU run the fused CUDA kernels of the training ops
// (layer norm, bias + ReLU + dropout, embedding, cross-entropy, the dense
// layers' weight gradients, Adam): on by default; NMT_CUDA_FUSED_OPS=0 (or
// set_cuda_fused_ops(false), for tests) runs the LibTorch composites
// instead, which is how the two are compared. Meaningless without CUDA.
inline std::atomic<bool>& cuda_fused_ops_flag() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("NMT_CUDA_FUSED_OPS");
    return v == nullptr || std::string_view(v) != "0";
  }()};
  return on;
}
inline bool cuda_fused_ops() { return cuda_fused_ops_flag().load(std::memory_order_relaxed); }
inline void set_cuda_fused_ops(bool on) { cuda_fused_ops_flag().store(on); }

// Whether a fused op runs its CUDA kernels on `t`: a GPU tensor of a CUDA
// build, with the switch on.
inline bool fused_on_cuda(const at::Tensor& t) {
#ifdef NMT_WITH_CUDA
  return t.is_cuda() && cuda_fused_ops();
#else
  (void)t;
  return false;
#endif
}

#ifdef NMT_WITH_CUDA
// The current LibTorch stream of t's device (made the current device) as
// the kernels take it; a launch's nonzero result (a cudaError_t value) as
// an error naming `what`. In ops/cuda_glue.cpp, which alone includes the
// CUDA headers.
void* cuda_stream_for(const at::Tensor& t);
void check_cuda(int err, const char* what);
template <typename F>
void launch_cuda(const at::Tensor& t, const char* what, F&& f) {
  check_cuda(f(static_cast<CUstream_st*>(cuda_stream_for(t))), what);
}
#endif

}  // namespace nmt::ops::glue
