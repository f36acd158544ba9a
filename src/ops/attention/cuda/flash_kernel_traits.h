// Compile-time shape of the CUDA flash-attention kernels, derived once per
// (head dim, element type, architecture): tile sizes, threads and warps, the
// register patch each thread owns, the shared-memory layout and its size, and
// the checks that the layout fits the GPU. The kernels (flash_attention.cu),
// the tile primitives (flash_tile.cuh) and their CPU emulation test read
// every number from here, so a new head dim, dtype or GPU is one new
// instantiation rather than edited loops.
//
// Plain C++ (no CUDA headers needed): the host launch code and host tests
// can include it; under nvcc the ownership maps are __host__ __device__.
#pragma once

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#if defined(__CUDACC__)
#define NMT_FLASH_HD __host__ __device__ __forceinline__
#else
#define NMT_FLASH_HD inline
#endif

namespace nmt::ops::cuda::flash {

// ---------------------------------------------------------------------------
// Architecture: shared-memory limits in bytes (CUDA C++ Programming Guide,
// "Technical Specifications per Compute Capability"). kArch is numbered like
// __CUDA_ARCH__ (800 = sm_80, 900 = sm_90).
// ---------------------------------------------------------------------------
// Dynamic shared memory a launch may ask for without opting in with
// cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize) (all archs).
constexpr int kSmemDefaultPerBlock = 48 * 1024;
// Shared memory the system keeps for each resident block (sm_80 and later):
// it counts against the SM's capacity when blocks per SM are worked out.
constexpr int kSmemReservedPerBlock = 1024;

template <int kArch>
struct ArchTraits;
template <>
struct ArchTraits<800> {  // A100
  static constexpr int kSmemPerSm = 164 * 1024;
  static constexpr int kSmemPerBlockOptIn = 163 * 1024;
};
template <>
struct ArchTraits<900> {  // H100 / H200
  static constexpr int kSmemPerSm = 228 * 1024;
  static constexpr int kSmemPerBlockOptIn = 227 * 1024;
};

// The tuning one compilation pass uses. Device passes for sm_90 and later get
// the sm_90 numbers, all others the sm_80 numbers (sm_86 / sm_89 included:
// they compile, and the launches that need more than their 99 KB per block
// return the cudaFuncSetAttribute error at run time). The host pass gets sm_90;
// it reads only arch-independent members (see FlashFwdTraits below).
#if defined(__CUDA_ARCH__)
constexpr int kTargetArch = __CUDA_ARCH__ >= 900 ? 900 : 800;
#else
constexpr int kTargetArch = 900;
#endif

// Blocks per SM that __launch_bounds__ asks the register allocator to allow:
// `wanted`, capped by how many blocks of smem_bytes the SM's shared memory
// holds (at least 1). Asking for more than fit only forces spills for no
// occupancy.
template <int kArch>
constexpr int min_blocks_per_sm(int wanted, int smem_bytes) {
  const int fit = ArchTraits<kArch>::kSmemPerSm / (smem_bytes + kSmemReservedPerBlock);
  return fit < 1 ? 1 : (fit < wanted ? fit : wanted);
}
// What the tensor-core kernels want: two blocks of up to 4 warps, one of 8
// (a thread may then use all 255 registers; 65,536 a SM).
constexpr int mma_blocks_wanted(int threads) { return threads <= 128 ? 2 : 1; }

// ---------------------------------------------------------------------------
// Element type of the CUDA-core kernels: what Q, K, V, dO are stored as in
// global and shared memory, and what dot products accumulate in. bf16 inputs
// have a tensor-core forward of their own (FlashFwdMmaTraits below).
// ---------------------------------------------------------------------------
template <typename Elem>
struct ElemTraits;
template <>
struct ElemTraits<float> {
  using Acc = float;          // accumulators, P and dS
  static constexpr int kVec = 4;  // elements per 16-byte vector (float4 loads, cp.async 16)
};

// ---------------------------------------------------------------------------
// Hand-tuned choices per padded head dim: query rows (kBr) and keys (kBc) per
// block, threads, and the blocks per SM __launch_bounds__ asks for. Every
// other number is derived from these below.
// ---------------------------------------------------------------------------
template <int kD>
struct FwdTileChoice;
// D <= 64: 128 queries x 64 keys, 8 warps (104 KB smem at D = 64: two blocks
// fit an H100 SM, one an A100 SM).
template <>
struct FwdTileChoice<32> {
  static constexpr int kBr = 128, kBc = 64, kThreads = 256, kMinBlocks = 2;
};
template <>
struct FwdTileChoice<64> {
  static constexpr int kBr = 128, kBc = 64, kThreads = 256, kMinBlocks = 2;
};
// D = 128: 64 queries x 32 keys, 4 warps; the O patch alone is 64 registers.
template <>
struct FwdTileChoice<128> {
  static constexpr int kBr = 64, kBc = 32, kThreads = 128, kMinBlocks = 2;
};
template <>
struct FwdTileChoice<192> {
  static constexpr int kBr = 32, kBc = 32, kThreads = 128, kMinBlocks = 1;
};
template <>
struct FwdTileChoice<256> {
  static constexpr int kBr = 32, kBc = 32, kThreads = 128, kMinBlocks = 1;
};

// The backward keeps dK and dV patches (2 * kBc * kD / kThreads registers)
// plus S and dP patches live, so its tiles are smaller than the forward's.
template <int kD>
struct BwdTileChoice;
template <>
struct BwdTileChoice<32> {
  static constexpr int kBr = 64, kBc = 64, kThreads = 128, kMinBlocks = 2;
};
template <>
struct BwdTileChoice<64> {
  static constexpr int kBr = 64, kBc = 64, kThreads = 128, kMinBlocks = 2;
};
template <>
struct BwdTileChoice<128> {
  static constexpr int kBr = 32, kBc = 32, kThreads = 128, kMinBlocks = 2;
};
template <>
struct BwdTileChoice<192> {
  static constexpr int kBr = 32, kBc = 32, kThreads = 128, kMinBlocks = 1;
};
// D = 256: 16 keys per block keeps the dK / dV patches at 32 registers each
// (32 keys spill).
template <>
struct BwdTileChoice<256> {
  static constexpr int kBr = 32, kBc = 16, kThreads = 128, kMinBlocks = 1;
};

// ---------------------------------------------------------------------------
// What forward and backward share: the thread grid and the register patches.
//
// Threads form kRowGroups x kColGroups; the kColGroups = 8 lanes of a row
// group are adjacent lanes of one warp (softmax row reductions are 3 shuffles)
// and a warp holds 4 row groups. With the paddings below, row r of a
// [rows][kStride] tile starts at bank 4r and row r of a [kBr][kPStride] tile
// at bank 8r, so every shared-memory read of the primitives is a broadcast or
// a conflict-free 128-byte access.
//
// Register patches (t < kTm, u < kTn, e < kTd, c < kVec):
//   score-like (S, P, dP, dS) [t][u]:  query row_of(rg, t), key key_of(cg, u)
//   output-like (O, dQ) [t][e][c]:     query row_of(rg, t), head-dim column dcol_of(cg, e) + c
// ---------------------------------------------------------------------------
template <int kD, typename Elem, int kArch, int kBr_, int kBc_, int kThreads_>
struct FlashTraitsBase {
  using Element = Elem;
  using Acc = typename ElemTraits<Elem>::Acc;
  using Arch = ArchTraits<kArch>;
  static constexpr int kArchId = kArch;

  static constexpr int kHeadDim = kD;  // padded head dim; columns >= the real D are zeros
  static constexpr int kBr = kBr_;     // query rows per tile
  static constexpr int kBc = kBc_;     // keys per tile
  static constexpr int kThreads = kThreads_;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kVec = ElemTraits<Elem>::kVec;

  static constexpr int kColGroups = 8;
  static constexpr int kRowGroups = kThreads / kColGroups;
  static constexpr int kTm = kBr / kRowGroups;          // query rows per thread
  static constexpr int kTn = kBc / kColGroups;          // keys per thread (score-like)
  static constexpr int kTd = kD / (kColGroups * kVec);  // head-dim vectors per thread (output-like)

  // Shared-memory row strides in elements: 4 floats of padding on [rows][kD]
  // tiles (Q, K, V, dO), 8 on [kBr][kBc] probability tiles (P, dS).
  static constexpr int kTilePad = 4;
  static constexpr int kProbPad = 8;
  static constexpr int kStride = kD + kTilePad;
  static constexpr int kPStride = kBc + kProbPad;

  NMT_FLASH_HD static constexpr int row_of(int rg, int t) { return rg + kRowGroups * t; }
  NMT_FLASH_HD static constexpr int key_of(int cg, int u) { return cg + kColGroups * u; }
  NMT_FLASH_HD static constexpr int dcol_of(int cg, int e) {
    return kVec * cg + kColGroups * kVec * e;
  }

  static_assert(std::is_same_v<Elem, float>,
                "the CUDA-core tile primitive is float32; bf16 needs its own ElemTraits and mma");
  static_assert(kThreads % 32 == 0 && kRowGroups * kColGroups == kThreads, "thread grid");
  static_assert(32 % kColGroups == 0, "a row group's lanes must sit in one warp (shuffles)");
  static_assert(kBr % kRowGroups == 0 && kBc % kColGroups == 0, "tile / thread grid");
  static_assert(kBc % kVec == 0, "P V and dS K read P / dS rows kVec keys at a time");
  static_assert(kD % (kColGroups * kVec) == 0, "head dim / output-like patch");
  static_assert(kStride % kVec == 0 && kPStride % kVec == 0, "16-byte aligned smem rows");
};

// ---------------------------------------------------------------------------
// Forward: one block per (b, h, query tile).
// Shared memory (elements):  q_s [kBr][kStride] | k_s [kBc][kStride] |
//                            v_s [kBc][kStride] | p_s [kBr][kPStride]
// ---------------------------------------------------------------------------
template <int kD, typename Elem, int kArch>
struct FlashFwdTraits
    : FlashTraitsBase<kD, Elem, kArch, FwdTileChoice<kD>::kBr, FwdTileChoice<kD>::kBc,
                      FwdTileChoice<kD>::kThreads> {
  using Base = FlashTraitsBase<kD, Elem, kArch, FwdTileChoice<kD>::kBr, FwdTileChoice<kD>::kBc,
                               FwdTileChoice<kD>::kThreads>;
  using Base::kBc;
  using Base::kBr;
  using Base::kPStride;
  using Base::kStride;

  static constexpr int kSmemQ = 0;
  static constexpr int kSmemK = kSmemQ + kBr * kStride;
  static constexpr int kSmemV = kSmemK + kBc * kStride;
  static constexpr int kSmemP = kSmemV + kBc * kStride;
  static constexpr int kSmemElems = kSmemP + kBr * kPStride;
  static constexpr int kSmemBytes = kSmemElems * static_cast<int>(sizeof(Elem));
  // Every instantiation today is above 48 KB: the launch opts in per kernel.
  static constexpr bool kNeedsSmemOptIn = kSmemBytes > kSmemDefaultPerBlock;
  static constexpr int kMinBlocksPerSm = min_blocks_per_sm<kArch>(FwdTileChoice<kD>::kMinBlocks, kSmemBytes);

  // Unrolling of the tile loops. S = Q K^T steps over d one vector at a
  // time: each step already has kTm * kTn * 4 independent FMAs, and unrolling
  // lets the scheduler hoist the next step's loads, which spills under the
  // 128-register cap of the 256-thread configs.
  static constexpr int kUnrollQK = 1;
  static constexpr int kUnrollPV = 2;

  static_assert(kSmemBytes <= Base::Arch::kSmemPerBlockOptIn,
                "forward tile exceeds the per-block shared memory of this arch");
};

// ---------------------------------------------------------------------------
// Backward: one block per (b, h, key tile), looping over query tiles.
// Shared memory (elements):  q_s [kBr][kStride] | do_s [kBr][kStride] |
//                            k_s [kBc][kStride] | v_s [kBc][kStride] |
//                            p_s [kBr][kPStride] | ds_s [kBr][kPStride]
// Extra register patch: key-row (dK, dV) [r][e][c] with r < kJn: key
// key_row_of(rg, r), head-dim column dcol_of(cg, e) + c.
// ---------------------------------------------------------------------------
template <int kD, typename Elem, int kArch>
struct FlashBwdTraits
    : FlashTraitsBase<kD, Elem, kArch, BwdTileChoice<kD>::kBr, BwdTileChoice<kD>::kBc,
                      BwdTileChoice<kD>::kThreads> {
  using Base = FlashTraitsBase<kD, Elem, kArch, BwdTileChoice<kD>::kBr, BwdTileChoice<kD>::kBc,
                               BwdTileChoice<kD>::kThreads>;
  using Base::kBc;
  using Base::kBr;
  using Base::kPStride;
  using Base::kRowGroups;
  using Base::kStride;

  static constexpr int kJn = kBc / kRowGroups;  // key rows per thread (dK, dV)
  NMT_FLASH_HD static constexpr int key_row_of(int rg, int r) { return rg * kJn + r; }

  static constexpr int kSmemQ = 0;
  static constexpr int kSmemDO = kSmemQ + kBr * kStride;
  static constexpr int kSmemK = kSmemDO + kBr * kStride;
  static constexpr int kSmemV = kSmemK + kBc * kStride;
  static constexpr int kSmemP = kSmemV + kBc * kStride;
  static constexpr int kSmemDS = kSmemP + kBr * kPStride;
  static constexpr int kSmemElems = kSmemDS + kBr * kPStride;
  static constexpr int kSmemBytes = kSmemElems * static_cast<int>(sizeof(Elem));
  static constexpr bool kNeedsSmemOptIn = kSmemBytes > kSmemDefaultPerBlock;
  static constexpr int kMinBlocksPerSm = min_blocks_per_sm<kArch>(BwdTileChoice<kD>::kMinBlocks, kSmemBytes);

  // The score-like passes (Q K^T, dO V^T) unroll 4 here: the 128-thread
  // backward has the registers. The dQ pass keeps large head dims rolled:
  // hoisted K loads would spill.
  static constexpr int kUnrollQK = 4;
  static constexpr int kUnrollDKDV = 2;
  static constexpr int kUnrollDQ = kD >= 192 ? 1 : 2;

  static_assert(kBc % kRowGroups == 0, "key rows per thread");
  static_assert(kBr % Base::kVec == 0, "tile shape");
  static_assert(kSmemBytes <= Base::Arch::kSmemPerBlockOptIn,
                "backward tile exceeds the per-block shared memory of this arch");
};

// ---------------------------------------------------------------------------
// Tensor-core forward (flash_attention_bf16.cu): bf16 Q, K, V in, float32
// accumulators, mma.sync m16n8k16 (sm_80 and later). One block per (b, h,
// query tile); each warp owns kMTiles 16-row m-tiles of the scores and of O,
// held in registers in the mma's fragment layout, and its Q fragments for the
// whole kernel. K and V tiles stream through shared memory (cp.async), read
// with ldmatrix (V transposed by ldmatrix.trans, so V needs no transposed
// copy); each K or V fragment feeds the mmas of all the warp's m-tiles, so
// more m-tiles per warp means fewer shared-memory reads per mma.
// Shared memory (bf16 elements): q_s [kBr][kStride] | k_s [kBc][kStride] |
//                                v_s [kBc][kStride]
// ---------------------------------------------------------------------------
// kWarps warps of kMTiles m-tiles each; kBc keys a step (0: 64 at D <= 64,
// else 32); kQInRegs 1 / 0 / -1: Q's fragments held in registers / read from
// shared memory at each step / registers at D <= 64; kHeadsFastest: causal
// launches place blocks with the (batch, head) fastest (flash::block_place).
template <int kWarps_ = 4, int kMTiles_ = 2, int kBc_ = 0, int kQInRegs_ = -1, bool kHeadsFastest_ = false>
struct FwdTiling {
  static constexpr int kWarps = kWarps_;
  static constexpr int kMTiles = kMTiles_;
  static constexpr int kBcOr0 = kBc_;
  static constexpr int kQInRegsOrAuto = kQInRegs_;
  static constexpr bool kHeadsFastest = kHeadsFastest_;
};

template <int kD, int kArch, class Tiling = FwdTiling<>>
struct FlashFwdMmaTraits {
  using Arch = ArchTraits<kArch>;
  static constexpr int kHeadDim = kD;  // padded head dim; columns >= the real D are zeros
  static constexpr int kWarps = Tiling::kWarps;
  static constexpr int kThreads = 32 * kWarps;
  // Two m-tiles per warp by default: each K or V fragment read from shared
  // memory then feeds two mmas. At D = 128 the O accumulators of two m-tiles
  // take 128 registers per thread, so the warp's Q fragments (another 64) are
  // not kept: they are read again from shared memory for every key tile, and
  // the key tile shrinks to 32 (S takes 32 registers instead of 64).
  static constexpr int kMTiles = Tiling::kMTiles;
  static constexpr bool kQInRegs = Tiling::kQInRegsOrAuto < 0 ? kD <= 64 : Tiling::kQInRegsOrAuto != 0;
  static constexpr bool kHeadsFastest = Tiling::kHeadsFastest;
  static constexpr int kRowsPerWarp = 16 * kMTiles;
  static constexpr int kBr = kWarps * kRowsPerWarp;
  static constexpr int kBc = Tiling::kBcOr0 != 0 ? Tiling::kBcOr0 : (kD <= 64 ? 64 : 32);
  static constexpr int kElemBytes = 2;  // bf16
  static constexpr int kVec = 16 / kElemBytes;  // elements per 16-byte cp.async / ldmatrix row
  // 16 bytes of padding per row: a row is then an odd number of 16-byte
  // units, so the 8 rows one ldmatrix phase reads fall in 8 distinct groups
  // of 4 banks (no conflicts).
  static constexpr int kPad = kVec;
  static constexpr int kStride = kD + kPad;
  static constexpr int kKSteps = kD / 16;     // k16 steps of S = Q K^T
  static constexpr int kScoreTiles = kBc / 8;  // n8 tiles of S per warp
  static constexpr int kPvSteps = kBc / 16;   // k16 steps of O += P V
  static constexpr int kOutTiles = kD / 8;    // n8 tiles of O per warp

  static constexpr int kSmemQ = 0;
  static constexpr int kSmemK = kSmemQ + kBr * kStride;
  static constexpr int kSmemV = kSmemK + kBc * kStride;
  static constexpr int kSmemElems = kSmemV + kBc * kStride;
  static constexpr int kSmemBytes = kSmemElems * kElemBytes;
  static constexpr bool kNeedsSmemOptIn = kSmemBytes > kSmemDefaultPerBlock;
  static constexpr int kMinBlocksPerSm = min_blocks_per_sm<kArch>(mma_blocks_wanted(kThreads), kSmemBytes);

  static_assert(kD % 16 == 0 && kBc % 16 == 0, "mma k16 steps");
  static_assert(kScoreTiles % 2 == 0 && kOutTiles % 2 == 0, "ldmatrix.x4 loads two n8 tiles");
  static_assert((kStride * kElemBytes / 16) % 2 == 1, "odd 16-byte units per row: no bank conflicts");
  static_assert(kSmemBytes <= Arch::kSmemPerBlockOptIn,
                "tensor-core forward tile exceeds the per-block shared memory of this arch");
};

// ---------------------------------------------------------------------------
// Tensor-core backward (flash_attention_bf16_bwd.cu): two kernels of the
// forward's shape, each warp owning kMTiles m-tiles of 16 rows whose gradient
// it accumulates in registers while tiles of the other side stream through
// shared memory:
//   dK/dV kernel: one block per (b, h, kBlockRows keys); warp w owns keys
//     kRowsPerWarp w .. and streams query tiles (Q, dO, lse, delta) of
//     kStreamRows rows;
//   dQ kernel:    one block per (b, h, 64 queries); warp w owns queries
//     16w..16w+15 and streams key tiles (K, V) of kStreamRows rows (one
//     m-tile per warp, 4 warps: the default tiling).
// Deterministic mode: both recompute S and dP from the forward's lse, so
// neither needs the other's results and dQ needs no atomics: the gradients
// are the same bits on every run. Otherwise the dK/dV kernel also adds each
// query tile's dQ = dS K into a float32 buffer with atomics, and the dQ
// kernel is not run (5 products per tile instead of 7).
// The dK/dV kernel's tiling is a template choice (BwdTiling below): more keys
// per block halve the dQ atomics and the Q / dO reads per key; two m-tiles
// per warp let each Q or dO fragment read from shared memory feed two mmas.
// Shared memory (bf16 elements, then float32 statistics):
//   fixed_a [kBlockRows][kStride] | fixed_b [kBlockRows][kStride] |
//   stream_a [2][kStreamRows][kStride] | stream_b [2][kStreamRows][kStride] |
//   ds [kBlockRows][kDsStride] (dS^T, atomic dQ only) |
//   stats [2][2][kStreamRows] floats (lse and delta of a query tile, double-buffered)
// fixed = K, V (dK/dV kernel) or Q, dO (dQ kernel); stream = Q, dO or K, V.
// ---------------------------------------------------------------------------
// kWarps warps of kMTiles m-tiles each; kStreamRows rows of the other side
// per step (0: 64 at D <= 64, else 32); kHeadsFastest: causal launches
// place blocks with the (batch, head) fastest (flash::block_place).
template <int kWarps_ = 4, int kMTiles_ = 1, int kStreamRows_ = 0, bool kHeadsFastest_ = false>
struct BwdTiling {
  static constexpr int kWarps = kWarps_;
  static constexpr int kMTiles = kMTiles_;
  static constexpr int kStreamRowsOr0 = kStreamRows_;
  static constexpr bool kHeadsFastest = kHeadsFastest_;
};

template <int kD, int kArch, class Tiling = BwdTiling<>>
struct FlashBwdMmaTraits {
  using Arch = ArchTraits<kArch>;
  static constexpr int kHeadDim = kD;  // padded head dim; columns >= the real D are zeros
  static constexpr int kWarps = Tiling::kWarps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMTiles = Tiling::kMTiles;
  static constexpr int kRowsPerWarp = 16 * kMTiles;
  static constexpr int kBlockRows = kWarps * kRowsPerWarp;  // keys (dK/dV) or queries (dQ) per block
  // Rows of the other side per step. At D = 128 the dK and dV accumulators
  // alone are 128 registers per thread and m-tile, so the score tiles shrink
  // to 32 columns by default.
  static constexpr int kStreamRows = Tiling::kStreamRowsOr0 != 0 ? Tiling::kStreamRowsOr0 : (kD <= 64 ? 64 : 32);
  static constexpr int kElemBytes = 2;  // bf16
  static constexpr int kVec = 16 / kElemBytes;
  static constexpr int kPad = kVec;  // odd 16-byte units per row: conflict-free ldmatrix
  static constexpr int kStride = kD + kPad;
  static constexpr int kKSteps = kD / 16;                 // k16 steps over the head dim (S, dP)
  static constexpr int kScoreTiles = kStreamRows / 8;     // n8 tiles of S and dP per m-tile
  static constexpr int kStreamSteps = kStreamRows / 16;   // k16 steps over the streamed rows
  static constexpr int kOutTiles = kD / 8;                // n8 tiles of a gradient patch

  // dQ by atomics (the dK/dV kernel, when not deterministic): the block's
  // dS^T [kBlockRows keys][kStreamRows queries] goes through shared memory,
  // and the warps split dQ's patch [kStreamRows x kD] = dS K: kDqMTiles
  // m-tiles of 16 queries, each shared by kDqWarpsPerM warps that take
  // kDqOutTiles n8 tiles of the head dim apiece.
  static constexpr int kDsStride = kStreamRows + kPad;
  static constexpr int kDqMTiles = kStreamRows / 16;
  static constexpr int kDqWarpsPerM = kWarps / kDqMTiles;
  static constexpr int kDqOutTiles = kOutTiles / kDqWarpsPerM;
  static constexpr int kBlockSteps = kBlockRows / 16;  // k16 steps over the block's keys

  static constexpr int kSmemFixedA = 0;
  static constexpr int kSmemFixedB = kSmemFixedA + kBlockRows * kStride;
  static constexpr int kSmemStreamA = kSmemFixedB + kBlockRows * kStride;  // + buf * kStreamRows * kStride
  static constexpr int kSmemStreamB = kSmemStreamA + 2 * kStreamRows * kStride;
  static constexpr int kSmemDS = kSmemStreamB + 2 * kStreamRows * kStride;
  static constexpr int kSmemElems = kSmemDS + kBlockRows * kDsStride;
  static constexpr int kSmemStatsOffsetBytes = kSmemElems * kElemBytes;
  static constexpr int kSmemBytes = kSmemStatsOffsetBytes + 2 * 2 * kStreamRows * 4;
  static constexpr bool kNeedsSmemOptIn = kSmemBytes > kSmemDefaultPerBlock;
  static constexpr int kMinBlocksPerSm = min_blocks_per_sm<kArch>(mma_blocks_wanted(kThreads), kSmemBytes);

  static_assert(kD % 16 == 0 && kStreamRows % 16 == 0, "mma k16 steps");
  static_assert(kScoreTiles % 2 == 0 && kOutTiles % 2 == 0, "ldmatrix.x4 loads two n8 tiles");
  static_assert((kStride * kElemBytes / 16) % 2 == 1, "odd 16-byte units per row: no bank conflicts");
  static_assert(kSmemStatsOffsetBytes % 16 == 0, "statistics 16-byte aligned");
  static_assert((kDsStride * kElemBytes / 16) % 2 == 1, "dS^T rows: conflict-free ldmatrix");
  static_assert(kWarps % kDqMTiles == 0 && kOutTiles % kDqWarpsPerM == 0 && kDqOutTiles % 2 == 0,
                "dQ patch split over the warps");
  static_assert(kThreads >= kStreamRows, "one thread per streamed row loads its statistics");
  static_assert(kSmemBytes <= Arch::kSmemPerBlockOptIn,
                "tensor-core backward tile exceeds the per-block shared memory of this arch");
};

// ---------------------------------------------------------------------------
// A list of tilings (std::tuple of FwdTiling or BwdTiling) chosen from at run
// time: with_tiling<List>(i, f) calls f(TilingTag<T>{}) for the i-th type T
// and returns whether i was in range; f reads the type as
// typename decltype(tag)::type.
// ---------------------------------------------------------------------------
template <class T>
struct TilingTag {
  using type = T;
};
template <class List, class F, std::size_t... I>
bool with_tiling_at(int index, F& f, std::index_sequence<I...>) {
  return ((static_cast<int>(I) == index ? (f(TilingTag<std::tuple_element_t<I, List>>{}), true) : false) || ...);
}
template <class List, class F>
bool with_tiling(int index, F&& f) {
  return with_tiling_at<List>(index, f, std::make_index_sequence<std::tuple_size_v<List>>());
}
// The same from the list of the padded head dim a call runs at (Tilings<64>
// up to 64, else Tilings<128>, each with a member type List): f(d, tag) with
// d a std::integral_constant<int, 64 or 128>.
template <template <int> class Tilings, class F>
bool with_tiling(int head_dim, int index, F&& f) {
  if (head_dim <= 64)
    return with_tiling<typename Tilings<64>::List>(index, [&](auto tag) { f(std::integral_constant<int, 64>{}, tag); });
  return with_tiling<typename Tilings<128>::List>(index, [&](auto tag) { f(std::integral_constant<int, 128>{}, tag); });
}
// What a list's entry is called for people (benchmarks, tests): name_of(tag)
// for the entry `index` of the head dim's list, " (default)" after the one
// the op runs; "" for an index outside the list.
template <template <int> class Tilings, class NameOf>
std::string tiling_label(int head_dim, int index, int default_index, NameOf name_of) {
  std::string name;
  if (!with_tiling<Tilings>(head_dim, index, [&](auto, auto tag) { name = name_of(tag); })) return "";
  return index == default_index ? name + " (default)" : name;
}

}  // namespace nmt::ops::cuda::flash
