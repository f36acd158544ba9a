#include "ops/random/dropout.h"

#include <ATen/ATen.h>

namespace nmt::ops {

philox::DropoutStream Dropout::stream() const {
  philox::DropoutStream s;
  s.seed = seed;
  s.step = static_cast<uint32_t>(step);
  s.site = static_cast<uint32_t>(site);
  s.first_row = first_row;
  s.p = static_cast<float>(p);
  if (row_starts.defined()) {
    TORCH_CHECK(row_starts.is_cpu() && row_starts.scalar_type() == at::kLong && row_starts.is_contiguous() &&
                    row_starts.dim() == 1 && row_starts.numel() >= 1,
                "dropout: row_starts must be [B + 1] int64 contiguous on the CPU");
    s.row_starts = row_starts.data_ptr<int64_t>(), s.sentences = row_starts.numel() - 1;
  }
  return s;
}

namespace {

constexpr int64_t kLow32 = 0xFFFFFFFFll;

// a * m for 32-bit a (int64 tensor) and constant m, as {high word, low word},
// from 16-bit limbs so that no intermediate exceeds 2^35.
std::pair<at::Tensor, at::Tensor> mulhilo(const at::Tensor& a, uint32_t m) {
  const int64_t m1 = m >> 16, m0 = m & 0xFFFF;
  const at::Tensor a1 = a.bitwise_right_shift(16), a0 = a.bitwise_and(0xFFFF);
  const at::Tensor p00 = a0 * m0, p01 = a0 * m1, p10 = a1 * m0, p11 = a1 * m1;
  const at::Tensor mid = p01 + p10 + p00.bitwise_right_shift(16);
  const at::Tensor lo = mid.bitwise_and(0xFFFF).bitwise_left_shift(16).bitwise_or(p00.bitwise_and(0xFFFF));
  const at::Tensor hi = p11 + mid.bitwise_right_shift(16);
  return {hi, lo};
}

}  // namespace

at::Tensor dropout_multipliers(const Dropout& d, int64_t batch, int64_t length, int64_t channels,
                               const at::TensorOptions& options) {
  if (!d.active()) return at::ones({batch, length, channels}, options);
  TORCH_CHECK(!d.row_starts.defined(), "dropout_multipliers: [B, T, C] rows only, not packed ones");
#ifdef NMT_WITH_CUDA
  if (options.device().is_cuda() &&
      (options.dtype() == at::kFloat || options.dtype() == at::kBFloat16))
    return dropout_multipliers_cuda(d, batch, length, channels, options);
#endif
  const auto i64 = options.dtype(at::kLong);
  const philox::DropoutStream s = d.stream();
  const int64_t blocks = (channels + 63) / 64, groups = blocks * 16;
  // Counters for every (row, position, counter index g): [B, T, G] each.
  at::Tensor c0 = at::arange(groups, i64).view({1, 1, groups}).expand({batch, length, groups});
  at::Tensor c1 = (at::arange(length, i64).bitwise_and(0xFFFF) + (static_cast<int64_t>(s.site) << 16))
                      .view({1, length, 1}).expand({batch, length, groups});
  at::Tensor c2 = (at::arange(batch, i64) + s.first_row).bitwise_and(kLow32)
                      .view({batch, 1, 1}).expand({batch, length, groups});
  at::Tensor c3 = at::full({batch, length, groups}, static_cast<int64_t>(s.step), i64);
  int64_t k0 = s.seed & kLow32, k1 = (s.seed >> 32) & kLow32;
  for (int r = 0; r < 10; ++r) {
    const auto [hi0, lo0] = mulhilo(c0, philox::kMul0);
    const auto [hi1, lo1] = mulhilo(c2, philox::kMul1);
    const at::Tensor n0 = hi1.bitwise_xor(c1).bitwise_xor(k0);
    const at::Tensor n2 = hi0.bitwise_xor(c3).bitwise_xor(k1);
    c0 = n0, c1 = lo1, c2 = n2, c3 = lo0;
    k0 = (k0 + philox::kWeyl0) & kLow32;
    k1 = (k1 + philox::kWeyl1) & kLow32;
  }
  // Channel 64 b + 16 k + l is word k of counter 16 b + l (philox.h).
  const at::Tensor words = at::stack({c0, c1, c2, c3}, -1)  // [B, T, G, 4]
                               .view({batch, length, blocks, 16, 4})
                               .permute({0, 1, 2, 4, 3})
                               .reshape({batch, length, blocks * 64});
  const at::Tensor keep = words.narrow(2, 0, channels).ge(static_cast<int64_t>(philox::keep_threshold(s.p)));
  // The kernels scale by 1/(1 - p) with p rounded to float, so do we.
  return keep.to(options.dtype()) * (1.0 / (1.0 - static_cast<double>(s.p)));
}

}  // namespace nmt::ops
