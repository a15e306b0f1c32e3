// Tensor-core building blocks for sm_80 and newer (A100, H100/H200): shared-memory staging with
// cp.async, XOR-swizzled tiles, ldmatrix fragment loads and warp-level mma.sync. The tiled matmul
// and the fused MLP are made from these; a new tensor-core op should be too. Hopper's own path
// (wgmma, TMA, mbarriers; sm_90a) is the last section.
//
// The layer order of a kernel built from them:
//   global --cp_async_16--> swizzled shared tile --ldmatrix--> fragments --mma--> accumulators
// and the accumulators are written out through accumulator_coord (which thread holds which
// element).
//
// Every PTX instruction here needs sm_80 (mma.sync with bf16/tf32, cp.async). Compiled for an older
// architecture the device functions trap, so a host side must check the device's compute capability
// (has_tensor_cores) and take another path there.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "opgen/mbarrier.cuh"

namespace opgen {
namespace tc {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define OPGEN_TC_UNSUPPORTED 1
#endif

// Compute capability 8.0 or newer: mma.sync for bf16/f16/tf32, ldmatrix and cp.async exist.
inline bool has_tensor_cores(const cudaDeviceProp& props) {
  return props.major >= 8;
}

// The same for a device by index (a driver attribute query: microseconds, so callers on a hot
// path remember the answer).
inline bool device_has_tensor_cores(int device) {
  int major = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         major >= 8;
}

// ---------------------------------------------------------------------------------------------
// Fragments of one warp-wide mma.sync. Lanes are grouped in eights by quad: group = lane / 4 (0..7)
// and quad_lane = lane % 4 (0..3). Element positions below are (row, col) inside the fragment's
// tile; every register holds two 16-bit values (the lower column in the low half) or one tf32.
//
// m16n8k16 (bf16 / f16):
//   A (16x16, row-major):  reg r holds row group + 8*(r % 2), cols 2*quad_lane + 8*(r / 2) + {0, 1}
//   B (16x8, "col": k by n): reg r holds k = 2*quad_lane + 8*r + {0, 1}, n = group
// m16n8k8 (tf32):
//   A (16x8):              reg r holds row group + 8*(r % 2), col quad_lane + 4*(r / 2)
//   B (8x8):               reg r holds k = quad_lane + 4*r, n = group
// Accumulator C/D (16x8 float, both shapes):
//   element i (0..3) is row group + 8*(i / 2), col 2*quad_lane + i % 2
// ---------------------------------------------------------------------------------------------
struct FragmentA {  // 16x16 16-bit, or 16x8 tf32
  uint32_t reg[4];
};
struct FragmentB {  // 16x8 16-bit, or 8x8 tf32
  uint32_t reg[2];
};
struct Accumulator {  // 16x8 float
  float value[4] = {0.f, 0.f, 0.f, 0.f};
};

struct FragmentCoord {
  int row;
  int col;
};

// Which element of a 16x8 accumulator tile lane `lane` holds in its element i (0..3).
__host__ __device__ constexpr FragmentCoord accumulator_coord(int lane, int i) {
  return {lane / 4 + 8 * (i / 2), 2 * (lane % 4) + i % 2};
}

// Which A element (row, k) the low half of register r holds, m16n8k16 (the high half is k + 1).
__host__ __device__ constexpr FragmentCoord a16_coord(int lane, int r) {
  return {lane / 4 + 8 * (r % 2), 2 * (lane % 4) + 8 * (r / 2)};
}

// Which B element (k, n) the low half of register r holds, m16n8k16 (the high half is k + 1).
__host__ __device__ constexpr FragmentCoord b16_coord(int lane, int r) {
  return {2 * (lane % 4) + 8 * r, lane / 4};
}

// Which A element (row, k) register r holds, m16n8k8 tf32.
__host__ __device__ constexpr FragmentCoord a_tf32_coord(int lane, int r) {
  return {lane / 4 + 8 * (r % 2), lane % 4 + 4 * (r / 2)};
}

// Which B element (k, n) register r holds, m16n8k8 tf32.
__host__ __device__ constexpr FragmentCoord b_tf32_coord(int lane, int r) {
  return {lane % 4 + 4 * r, lane / 4};
}

// Shared-memory addresses: ldmatrix and cp.async take 32-bit shared-window addresses
// (mbarrier.cuh's shared_address).
using opgen::shared_address;

// ---------------------------------------------------------------------------------------------
// XOR swizzle of 16-byte chunks. ldmatrix reads eight 16-byte rows at once, and cp.async writes
// 16-byte chunks; with a row pitch that is a multiple of 128 bytes, the same chunk of eight
// consecutive rows falls into the same four banks (an 8-way conflict). XOR-ing the chunk index
// with bits of the row index spreads those eight reads over all 32 banks, with no padding:
//   >= 8 chunks a row (>= 128 bytes): chunk ^ (row % 8)
//      4 chunks a row (64 bytes):      chunk ^ ((row / 2) % 4)   (two rows share a 128-byte line)
//      2 chunks a row (32 bytes):      chunk ^ ((row / 4) % 2)
// (This is the same permutation CUTLASS/CuTe write as Swizzle<3,4,3> and its narrower forms.)
// A tile is kRows x kCols elements of T, row-major, kCols * sizeof(T) a multiple of 16 bytes.
// ---------------------------------------------------------------------------------------------
template <int kChunksPerRow>
__host__ __device__ constexpr int swizzle_chunk(int row, int chunk) {
  static_assert(kChunksPerRow >= 1 && (kChunksPerRow & (kChunksPerRow - 1)) == 0,
                "chunks per row must be a power of two");
  if constexpr (kChunksPerRow >= 8) {
    return chunk ^ (row % 8);
  } else if constexpr (kChunksPerRow == 4) {
    return chunk ^ ((row / 2) % 4);
  } else if constexpr (kChunksPerRow == 2) {
    return chunk ^ ((row / 4) % 2);
  } else {
    return chunk;
  }
}

template <typename T, int kRows_, int kCols_>
struct SwizzledTile {
  using Element = T;
  static constexpr int kRows = kRows_;
  static constexpr int kCols = kCols_;
  static constexpr int kElemsPerChunk = 16 / static_cast<int>(sizeof(T));
  static constexpr int kChunksPerRow = kCols / kElemsPerChunk;
  static constexpr int kElements = kRows * kCols;
  static_assert(kCols % kElemsPerChunk == 0, "a tile row must be whole 16-byte chunks");

  // Offset in elements of (row, col) in the swizzled tile. Elements of one 16-byte chunk stay
  // together, so a chunk-aligned col gives the start of a 16-byte run.
  __host__ __device__ static constexpr int offset(int row, int col) {
    const int chunk = col / kElemsPerChunk;
    return row * kCols + swizzle_chunk<kChunksPerRow>(row, chunk) * kElemsPerChunk +
           col % kElemsPerChunk;
  }
};

// ---------------------------------------------------------------------------------------------
// cp.async: asynchronous global -> shared copies (they bypass registers and, with .cg, L1).
// A thread issues copies, commits them as one group, and later waits until at most N of its
// groups are still in flight; a __syncthreads() after the wait makes the data visible to the block.
// ---------------------------------------------------------------------------------------------

// Copies 16 bytes, or writes 16 zero bytes when !valid (edges of a tile past the matrix). Both
// addresses must be 16-byte aligned; when !valid the global pointer is not read (pass any valid
// pointer, e.g. the tensor's base).
__device__ __forceinline__ void cp_async_16(uint32_t shared_dst, const void* global_src,
                                            bool valid) {
#ifdef OPGEN_TC_UNSUPPORTED
  __trap();
#else
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_dst), "l"(global_src),
               "r"(src_bytes));
#endif
}

// Copies a piece of kBytes (4 or 8) bytes, zero-filled when !valid; both addresses aligned to it.
// For operands without 16-byte alignment (cp.async.cg takes only whole 16-byte chunks).
template <int kBytes>
__device__ __forceinline__ void cp_async_piece(uint32_t shared_dst, const void* global_src,
                                               bool valid) {
  static_assert(kBytes == 4 || kBytes == 8, "cp_async_16 copies whole 16-byte chunks");
#ifdef OPGEN_TC_UNSUPPORTED
  __trap();
#else
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(shared_dst), "l"(global_src),
               "n"(kBytes), "r"(valid ? kBytes : 0));
#endif
}

__device__ __forceinline__ void cp_async_commit() {
#ifndef OPGEN_TC_UNSUPPORTED
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#ifndef OPGEN_TC_UNSUPPORTED
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// ---------------------------------------------------------------------------------------------
// ldmatrix: each of the 1, 2 or 4 8x8 matrices of 16-bit values is read from eight row addresses
// given by lanes 8*m .. 8*m+7 (matrix m; lanes past the count's need still pass an address for x1
// and x2, it is ignored). Lane l receives, in register m, row l / 4, columns 2*(l % 4) + {0, 1}
// of matrix m; with .trans it receives the transpose: rows 2*(l % 4) + {0, 1}, column l / 4.
//
// For an mma operand that means (row/col offsets inside a 16x16 tile of the stored matrix):
//   A row-major (k contiguous), x4:      lane l points at row l % 16, col 8 * (l / 16)
//   A k-major (m contiguous), x4.trans:  lane l points at k row (l % 8) + 8 * (l / 16),
//                                        m col 8 * ((l / 8) % 2)
//   B n-major (k contiguous), x2:        lane l points at n row l % 8, k col 8 * ((l / 8) % 2)
//   B k-major (n contiguous), x2.trans:  lane l points at k row l % 16, n col 0
// ldmatrix_a_offset / ldmatrix_b_offset below compute those. A 32-bit (tf32) tile read with
// ldmatrix (non-trans) gives the tf32 fragments of the same row-major/n-major layouts, four
// floats per 16-byte row.
// ---------------------------------------------------------------------------------------------
template <int kCount, bool kTrans>
__device__ __forceinline__ void ldmatrix(uint32_t (&reg)[kCount], uint32_t shared_src) {
  static_assert(kCount == 1 || kCount == 2 || kCount == 4, "ldmatrix reads 1, 2 or 4 matrices");
#ifdef OPGEN_TC_UNSUPPORTED
  __trap();
#else
  if constexpr (kCount == 1) {
    if constexpr (kTrans) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                   : "=r"(reg[0])
                   : "r"(shared_src));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                   : "=r"(reg[0])
                   : "r"(shared_src));
    }
  } else if constexpr (kCount == 2) {
    if constexpr (kTrans) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                   : "=r"(reg[0]), "=r"(reg[1])
                   : "r"(shared_src));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                   : "=r"(reg[0]), "=r"(reg[1])
                   : "r"(shared_src));
    }
  } else {
    if constexpr (kTrans) {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(reg[0]), "=r"(reg[1]), "=r"(reg[2]), "=r"(reg[3])
                   : "r"(shared_src));
    } else {
      asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(reg[0]), "=r"(reg[1]), "=r"(reg[2]), "=r"(reg[3])
                   : "r"(shared_src));
    }
  }
#endif
}

__device__ __forceinline__ void ldmatrix_x1(uint32_t (&reg)[1], uint32_t src) {
  ldmatrix<1, false>(reg, src);
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&reg)[2], uint32_t src) {
  ldmatrix<2, false>(reg, src);
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&reg)[4], uint32_t src) {
  ldmatrix<4, false>(reg, src);
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t (&reg)[1], uint32_t src) {
  ldmatrix<1, true>(reg, src);
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&reg)[2], uint32_t src) {
  ldmatrix<2, true>(reg, src);
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&reg)[4], uint32_t src) {
  ldmatrix<4, true>(reg, src);
}

// The (row, col) of the stored tile whose address lane `lane` passes to ldmatrix, for a 16x16
// (16-bit) A operand: kKMajor false = A stored row-major [m][k] (x4), true = stored [k][m]
// (x4.trans).
template <bool kKMajor>
__device__ __forceinline__ FragmentCoord ldmatrix_a_offset(int lane) {
  if constexpr (kKMajor) {
    return {(lane % 8) + 8 * (lane / 16), 8 * ((lane / 8) % 2)};
  } else {
    return {lane % 16, 8 * (lane / 16)};
  }
}

// Likewise for a 16x8 (16-bit) B operand read with x2: kKMajor false = B stored [n][k] (x2),
// true = stored [k][n] (x2.trans). Lanes 16..31 repeat lanes 0..15 (their addresses are unused).
template <bool kKMajor>
__device__ __forceinline__ FragmentCoord ldmatrix_b_offset(int lane) {
  if constexpr (kKMajor) {
    return {lane % 16, 0};
  } else {
    return {lane % 8, 8 * ((lane / 8) % 2)};
  }
}

// A 16x16 A-operand fragment (m16n8k16) from a swizzled shared tile holding the operand either
// as [m][k] (kKMajor false) or [k][m] (kKMajor true); (row0, col0) is the fragment's corner in the
// stored tile's own coordinates.
template <typename Tile, bool kKMajor>
__device__ __forceinline__ void load_a16(FragmentA& frag, const void* tile_base, int row0, int col0,
                                         int lane) {
  const FragmentCoord at = ldmatrix_a_offset<kKMajor>(lane);
  const auto* base = static_cast<const char*>(tile_base);
  const uint32_t src = shared_address(base + Tile::offset(row0 + at.row, col0 + at.col) *
                                                 sizeof(typename Tile::Element));
  ldmatrix<4, kKMajor>(frag.reg, src);
}

// A 16x8 B-operand fragment (m16n8k16) from a swizzled tile holding B as [n][k] (kKMajor false)
// or [k][n] (kKMajor true).
template <typename Tile, bool kKMajor>
__device__ __forceinline__ void load_b16(FragmentB& frag, const void* tile_base, int row0, int col0,
                                         int lane) {
  const FragmentCoord at = ldmatrix_b_offset<kKMajor>(lane);
  const auto* base = static_cast<const char*>(tile_base);
  const uint32_t src = shared_address(base + Tile::offset(row0 + at.row, col0 + at.col) *
                                                 sizeof(typename Tile::Element));
  ldmatrix<2, kKMajor>(frag.reg, src);
}

// Two neighbouring 16x8 B-operand fragments (n columns n0..n0+7 and n0+8..n0+15) with one
// ldmatrix.x4: matrices (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15), so
// registers 0-1 are the first fragment and 2-3 the second. Half the instructions of two load_b16.
//   B k-major ([k][n], x4.trans): lane l points at k row (l % 8) + 8 * ((l / 8) % 2), n col 8 * (l
//   / 16) B n-major ([n][k], x4):       lane l points at n row (l % 8) + 8 * (l / 16), k col 8 *
//   ((l / 8) % 2)
template <bool kKMajor>
__device__ __forceinline__ FragmentCoord ldmatrix_b_pair_offset(int lane) {
  if constexpr (kKMajor) {
    return {(lane % 8) + 8 * ((lane / 8) % 2), 8 * (lane / 16)};
  } else {
    return {(lane % 8) + 8 * (lane / 16), 8 * ((lane / 8) % 2)};
  }
}

template <typename Tile, bool kKMajor>
__device__ __forceinline__ void load_b16_pair(FragmentB& first, FragmentB& second,
                                              const void* tile_base, int row0, int col0, int lane) {
  const FragmentCoord at = ldmatrix_b_pair_offset<kKMajor>(lane);
  const auto* base = static_cast<const char*>(tile_base);
  const uint32_t src = shared_address(base + Tile::offset(row0 + at.row, col0 + at.col) *
                                                 sizeof(typename Tile::Element));
  uint32_t reg[4];
  ldmatrix<4, kKMajor>(reg, src);
  first.reg[0] = reg[0];
  first.reg[1] = reg[1];
  second.reg[0] = reg[2];
  second.reg[1] = reg[3];
}

// ---------------------------------------------------------------------------------------------
// Conversions.
// ---------------------------------------------------------------------------------------------

// A float rounded to tf32 (10-bit mantissa, to nearest, ties to even), as the tensor cores read
// it. sm_90 has the conversion as one instruction (cvt.rn.tf32.f32: F2FP); the ties-away form of
// older GPUs (cvt.rna) is emulated there by a finiteness test, an add and a mask, three a value on
// the MLP forward's path from x to its first MMA. Older GPUs get the same bits from integers.
__device__ __forceinline__ uint32_t to_tf32(float x) {
#if defined(OPGEN_TC_UNSUPPORTED)
  __trap();
  return 0;
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t out;
  asm("cvt.rn.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(x));
  return out;
#else
  const uint32_t bits = __float_as_uint(x);
  if (isnan(x)) return bits;  // the add could carry a NaN's mantissa into its sign
  return (bits + 0xFFFu + ((bits >> 13) & 1u)) & ~0x1FFFu;
#endif
}

// A value that is never a NaN (ReLU's output: fmaxf returns none) rounded to tf32 by one integer
// add of half a tf32 step, left in the 13 low bits the tensor cores ignore (an infinity's add stays
// in them too). It rounds ties away from zero where to_tf32 rounds them to even: the two differ
// only on an exact tie (one value in 8192), by one tf32 step. Kept for its speed: the MLP forward
// in TF32 with to_tf32 for ReLU's outputs as well ran 1-3.5% slower on an H200 (64x4, 2^20 rows:
// 125.1 -> 129.7 us; docs/benchmarks/mlp, 2026-11-29j).
__device__ __forceinline__ uint32_t to_tf32_not_nan(float x) {
  return __float_as_uint(x) + 0x1000u;
}

// A 16x8 tf32 A-operand fragment (m16n8k8) from a swizzled float tile holding A as [m][k]
// (kKMajor false: one ldmatrix.x4, each 8x8 b16 matrix being 8 rows of 4 floats) or [k][m]
// (kKMajor true: ldmatrix cannot transpose 32-bit values, so four scalar shared loads). Each value
// is rounded to tf32 (the tensor core would otherwise truncate it).
template <typename Tile, bool kKMajor>
__device__ __forceinline__ void load_a_tf32(FragmentA& frag, const float* tile_base, int row0,
                                            int col0, int lane) {
  if constexpr (kKMajor) {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const FragmentCoord at = a_tf32_coord(lane, r);  // (m, k)
      frag.reg[r] = to_tf32(tile_base[Tile::offset(row0 + at.col, col0 + at.row)]);
    }
  } else {
    const uint32_t src =
        shared_address(tile_base + Tile::offset(row0 + lane % 16, col0 + 4 * (lane / 16)));
    ldmatrix<4, false>(frag.reg, src);
#pragma unroll
    for (int r = 0; r < 4; ++r) frag.reg[r] = to_tf32(__uint_as_float(frag.reg[r]));
  }
}

// An 8x8 tf32 B-operand fragment from a swizzled float tile holding B as [n][k] (kKMajor false:
// ldmatrix.x2) or [k][n] (kKMajor true: two scalar shared loads), rounded to tf32.
template <typename Tile, bool kKMajor>
__device__ __forceinline__ void load_b_tf32(FragmentB& frag, const float* tile_base, int row0,
                                            int col0, int lane) {
  if constexpr (kKMajor) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const FragmentCoord at = b_tf32_coord(lane, r);  // (k, n)
      frag.reg[r] = to_tf32(tile_base[Tile::offset(row0 + at.row, col0 + at.col)]);
    }
  } else {
    const uint32_t src =
        shared_address(tile_base + Tile::offset(row0 + lane % 8, col0 + 4 * ((lane / 8) % 2)));
    ldmatrix<2, false>(frag.reg, src);
#pragma unroll
    for (int r = 0; r < 2; ++r) frag.reg[r] = to_tf32(__uint_as_float(frag.reg[r]));
  }
}

// Two neighbouring 8x8 tf32 B-operand fragments (n columns n0..n0+7 and n0+8..n0+15) with one
// ldmatrix.x4 from a float tile holding B as [n][k], its values taken as they are: for a tile
// whose values were rounded to tf32 when staged (to_tf32), which saves a conversion per register
// per MMA. Matrices (n 0-7, k 0-3), (n 0-7, k 4-7), (n 8-15, k 0-3), (n 8-15, k 4-7): lane l points
// at n row (l % 8) + 8 * (l / 16), k col 4 * ((l / 8) % 2).
template <typename Tile>
__device__ __forceinline__ void load_b_tf32_pair_rounded(FragmentB& first, FragmentB& second,
                                                         const float* tile_base, int row0, int col0,
                                                         int lane) {
  const uint32_t src = shared_address(
      tile_base + Tile::offset(row0 + lane % 8 + 8 * (lane / 16), col0 + 4 * ((lane / 8) % 2)));
  uint32_t reg[4];
  ldmatrix<4, false>(reg, src);
  first.reg[0] = reg[0];
  first.reg[1] = reg[1];
  second.reg[0] = reg[2];
  second.reg[1] = reg[3];
}

// ---------------------------------------------------------------------------------------------
// mma.sync: D = A * B + C over one warp, float accumulation (d may alias c).
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void mma_m16n8k16_bf16(Accumulator& d, const FragmentA& a,
                                                  const FragmentB& b) {
#ifdef OPGEN_TC_UNSUPPORTED
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d.value[0]), "+f"(d.value[1]), "+f"(d.value[2]), "+f"(d.value[3])
      : "r"(a.reg[0]), "r"(a.reg[1]), "r"(a.reg[2]), "r"(a.reg[3]), "r"(b.reg[0]), "r"(b.reg[1]));
#endif
}

__device__ __forceinline__ void mma_m16n8k16_f16(Accumulator& d, const FragmentA& a,
                                                 const FragmentB& b) {
#ifdef OPGEN_TC_UNSUPPORTED
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d.value[0]), "+f"(d.value[1]), "+f"(d.value[2]), "+f"(d.value[3])
      : "r"(a.reg[0]), "r"(a.reg[1]), "r"(a.reg[2]), "r"(a.reg[3]), "r"(b.reg[0]), "r"(b.reg[1]));
#endif
}

// Operands in tf32 (to_tf32, or floats read with ldmatrix and left to the hardware, which then
// truncates the low mantissa bits instead of rounding).
__device__ __forceinline__ void mma_m16n8k8_tf32(Accumulator& d, const FragmentA& a,
                                                 const FragmentB& b) {
#ifdef OPGEN_TC_UNSUPPORTED
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d.value[0]), "+f"(d.value[1]), "+f"(d.value[2]), "+f"(d.value[3])
      : "r"(a.reg[0]), "r"(a.reg[1]), "r"(a.reg[2]), "r"(a.reg[3]), "r"(b.reg[0]), "r"(b.reg[1]));
#endif
}

// The MMA of an element type: 16-bit types take m16n8k16, float takes m16n8k8 in tf32.
// kK is the k extent of one instruction.
template <typename T>
struct Mma;

}  // namespace tc
}  // namespace opgen

// Specializations for the torch element types (c10::BFloat16 and c10::Half are 16-bit PODs with the
// same bits as __nv_bfloat16 / __half).
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

namespace opgen {
namespace tc {

template <>
struct Mma<c10::BFloat16> {
  static constexpr int kK = 16;
  __device__ __forceinline__ static void run(Accumulator& d, const FragmentA& a,
                                             const FragmentB& b) {
    mma_m16n8k16_bf16(d, a, b);
  }
};

template <>
struct Mma<c10::Half> {
  static constexpr int kK = 16;
  __device__ __forceinline__ static void run(Accumulator& d, const FragmentA& a,
                                             const FragmentB& b) {
    mma_m16n8k16_f16(d, a, b);
  }
};

template <>
struct Mma<float> {
  static constexpr int kK = 8;
  __device__ __forceinline__ static void run(Accumulator& d, const FragmentA& a,
                                             const FragmentB& b) {
    mma_m16n8k8_tf32(d, a, b);
  }
};

}  // namespace tc
}  // namespace opgen

// =============================================================================================
// Hopper (sm_90a): warpgroup MMA (wgmma) reading both operands from shared memory, tiles brought
// in by the bulk tensor copy engine (TMA), and the mbarriers that hand a stage from the copy
// engine to the tensor cores and back. On H100/H200 a GEMM built from mma.sync (above) tops out
// near a third of cuBLAS (docs/benchmarks/matmul); cuBLAS's own kernels are made of these.
//
// The layer order of a kernel built from them:
//   global --tma_load_3d--> 128-byte-swizzled shared tile --wgmma_descriptor--> wgmma
//          (completes on an mbarrier)                        (accumulators in registers)
// with one producer warpgroup issuing the copies and one or more consumer warpgroups (warps
// 4w .. 4w+3) issuing the MMAs.
//
// wgmma and setmaxnreg exist only in the arch-specific sm_90a target, not in sm_90 (they would
// not run on later GPUs): OPGEN_TC_WGMMA is 1 in a device pass that has them. A kernel made of
// them declares its bounds with OPGEN_WGMMA_LAUNCH_BOUNDS, and the host asks wgmma_kernel_built
// whether the image it would launch was compiled with them (a build for plain sm_90 leaves the
// kernel empty) before it takes that path.
// =============================================================================================
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define OPGEN_TC_WGMMA 1
#else
#define OPGEN_TC_WGMMA 0
#endif

// The real bounds in an sm_90a pass; one thread elsewhere, so that the image a GPU loads tells the
// host (its maxThreadsPerBlock) whether the wgmma body is in it. Only device passes see the
// attribute: host code is the same either way.
#if OPGEN_TC_WGMMA || !defined(__CUDA_ARCH__)
#define OPGEN_WGMMA_LAUNCH_BOUNDS(threads) __launch_bounds__(threads, 1)
#else
#define OPGEN_WGMMA_LAUNCH_BOUNDS(threads) __launch_bounds__(1, 1)
#endif

namespace opgen {
namespace tc {

// Whether `kernel` (declared with OPGEN_WGMMA_LAUNCH_BOUNDS(threads)) can run on the current
// device with `threads` threads, i.e. whether the image loaded for it was compiled for sm_90a.
// No launch and no synchronization (safe while a CUDA graph is captured); callers remember it.
template <typename Kernel>
inline bool wgmma_kernel_built(Kernel kernel, int threads) {
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(kernel)) != cudaSuccess) {
    (void)cudaGetLastError();  // not loadable here: clear the error, take another path
    return false;
  }
  return attributes.maxThreadsPerBlock >= threads;
}

// Compute capability exactly 9.0 (H100, H200): the only GPUs that run sm_90a code.
inline bool device_is_sm90(int device) {
  int major = 0, minor = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
         cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess &&
         major == 9 && minor == 0;
}

// ---------------------------------------------------------------------------------------------
// An operand's k slice in shared memory as wgmma reads it, 16-bit elements, 128-byte swizzle.
//
// The unit of the 128-byte swizzle is an atom of 8 rows of 128 bytes (64 elements) at a
// 1024-byte boundary, whose 16-byte chunks are stored XOR-ed with the row index (chunk ^ row % 8,
// the permutation swizzle_chunk above applies, here on the address bits themselves). TMA writes
// exactly this when its box's inner extent is 128 bytes and CU_TENSOR_MAP_SWIZZLE_128B is set, so
// a slice is a stack of TMA boxes of 64 contiguous elements a row:
//   K-major (the operand stored with k contiguous: A as (m, k), B as (n, k)): one box of kMN rows
//     of 64 k. 8 rows (of m or n) apart = 1024 bytes (the descriptor's stride byte offset); the
//     leading byte offset is unused. The k step of one wgmma (16 elements, 32 bytes) stays inside
//     the 128-byte rows: it moves the start address by 32 bytes, and the hardware applies the
//     swizzle to the address it forms, as TMA did.
//   MN-major (m or n contiguous: A stored as (k, m), B as (k, n)): kMN / 64 boxes of 64 k rows of
//     64 m or n. 8 k rows apart = 1024 bytes (stride byte offset), 64 m or n apart = one box
//     (leading byte offset). A k step of 16 is two atoms down: 2048 bytes.
// (PTX ISA, "Shared Memory Matrix Layout" and "Matrix Descriptor Format" of wgmma.)
// ---------------------------------------------------------------------------------------------
template <int kMN_, bool kKMajor_>
struct WgmmaTile {
  static constexpr int kMN = kMN_;  // rows of m (A) or n (B) in the slice
  static constexpr bool kKMajor = kKMajor_;
  static constexpr int kK = 64;  // k of one slice: 128 bytes of 16-bit values, the swizzle span
  static constexpr int kBytes = kMN * kK * 2;
  static constexpr int kBoxInner = 64;                  // TMA box, contiguous elements
  static constexpr int kBoxOuter = kKMajor ? kMN : kK;  // TMA box, rows
  static constexpr int kBoxes = kKMajor ? 1 : kMN / 64;
  static constexpr int kBoxBytes = kBoxInner * kBoxOuter * 2;
  static constexpr uint32_t kStrideBytes = 1024;
  static constexpr uint32_t kLeadingBytes = kKMajor ? 16 : kBoxBytes;
  static_assert(kMN % 64 == 0 && kMN <= 256, "a slice is whole 64-row atoms, at most a TMA box");

  // Byte offset in the slice of the wgmma operand whose corner is m or n row `mn0` (a multiple of
  // 64) and k `k0` (a multiple of 16).
  __host__ __device__ static constexpr uint32_t offset(int mn0, int k0) {
    return kKMajor ? static_cast<uint32_t>(mn0 * 128 + k0 * 2)
                   : static_cast<uint32_t>((mn0 / 64) * kBoxBytes + (k0 / 8) * 1024);
  }
};

// A wgmma shared-memory matrix descriptor, 128-byte swizzle: start address, leading and stride
// byte offsets, each in 16-byte units (bits 0-13, 16-29, 32-45), base offset 0 (the tiles start
// at 1024-byte boundaries), swizzle mode 1 = 128 bytes (bits 62-63).
__host__ __device__ constexpr uint64_t wgmma_descriptor(uint32_t shared_addr,
                                                        uint32_t leading_bytes,
                                                        uint32_t stride_bytes) {
  return static_cast<uint64_t>((shared_addr & 0x3FFFF) >> 4) |
         (static_cast<uint64_t>((leading_bytes & 0x3FFFF) >> 4) << 16) |
         (static_cast<uint64_t>((stride_bytes & 0x3FFFF) >> 4) << 32) | (uint64_t{1} << 62);
}

// `desc` moved `bytes` (a multiple of 16) further into shared memory: its start address field
// (bits 0-13, 16-byte units) plus bytes / 16, which cannot carry out of the field while the
// address stays in the shared window (below 2^18 bytes). One add to the low word, where building
// the descriptor again per MMA masks, shifts and merges every field (about six uniform
// instructions a wgmma in the MLP's forward).
__host__ __device__ constexpr uint64_t advance_descriptor(uint64_t desc, uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) |
         static_cast<uint32_t>(static_cast<uint32_t>(desc) + (bytes >> 4));
}

template <typename Tile>
__host__ __device__ constexpr uint64_t wgmma_descriptor(uint32_t tile_addr, int mn0, int k0) {
  return wgmma_descriptor(tile_addr + Tile::offset(mn0, k0), Tile::kLeadingBytes,
                          Tile::kStrideBytes);
}

static_assert(advance_descriptor(wgmma_descriptor(0x400, 16, 1024), 0x2040) ==
                  wgmma_descriptor(0x2440, 16, 1024),
              "an advanced descriptor is the descriptor of the address it moved to");

// The fixed parts of the descriptor: the 128-byte swizzle and the strides sit where PTX says.
static_assert(wgmma_descriptor(0x400, 16, 1024) == ((uint64_t{1} << 62) | (uint64_t{64} << 32) |
                                                    (uint64_t{1} << 16) | uint64_t{0x40}),
              "wgmma descriptor fields");
static_assert(WgmmaTile<256, false>::offset(128, 16) == 2 * 8192 + 2048 &&
                  WgmmaTile<128, true>::offset(64, 48) == 64 * 128 + 96,
              "wgmma tile offsets");

// ---------------------------------------------------------------------------------------------
// wgmma itself. Between the accumulators' last ordinary use and the MMAs that update them comes
// wgmma_fence; MMAs issued since the last commit form a group; wgmma_wait<N> returns when at most
// N of this thread's groups are in flight (then their shared memory may be overwritten and their
// accumulators read).
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() {
#if OPGEN_TC_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void wgmma_commit() {
#if OPGEN_TC_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}

template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if OPGEN_TC_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}

// The registers a warpgroup's threads keep (setmaxnreg): a producer gives some back, consumers
// take them. Needs the kernel's register cap at entry (OPGEN_WGMMA_LAUNCH_BOUNDS).
template <int kRegisters>
__device__ __forceinline__ void warpgroup_registers_decrease() {
#if OPGEN_TC_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}

template <int kRegisters>
__device__ __forceinline__ void warpgroup_registers_increase() {
#if OPGEN_TC_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}

// D (64 x 256 float: thread t of the warpgroup holds d[4 j + i] at row 16 (t / 32) +
// accumulator_coord(t % 32, i).row, column 8 j + accumulator_coord(t % 32, i).col) += A (64 x 16)
// B (16 x 256), both read through descriptors. kTransA: A is M-major (stored (k, m)); kTransB: B
// is N-major (stored (k, n)). accumulate false: D = A B.
#define OPGEN_WGMMA_M64N256K16(TYPE)                                                               \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE                                 \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "    \
      "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, " \
      "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, " \
      "%55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, " \
      "%73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, " \
      "%91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, "    \
      "%107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, " \
      "%122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, %131, %132;\n}\n"                 \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), \
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), \
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), \
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), \
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), \
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),          \
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),        \
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),        \
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),        \
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])         \
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(kTransA ? 1 : 0),         \
        "n"(kTransB ? 1 : 0))

template <typename T, bool kTransA, bool kTransB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                                 bool accumulate) {
#if OPGEN_TC_WGMMA
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    OPGEN_WGMMA_M64N256K16("bf16");
  } else {
    static_assert(std::is_same_v<T, c10::Half>, "wgmma here takes bfloat16 or float16");
    OPGEN_WGMMA_M64N256K16("f16");
  }
#endif
}
#undef OPGEN_WGMMA_M64N256K16

// mbarriers hand a stage from the copy engine to the tensor cores and back (mbarrier.cuh).
using opgen::mbarrier_arrive;
using opgen::mbarrier_arrive_expect_tx;
using opgen::mbarrier_init;
using opgen::mbarrier_init_fence;
using opgen::mbarrier_wait;

// ---------------------------------------------------------------------------------------------
// TMA: one box of a tensor map (made on the host by encode_tensor_map) into shared memory,
// completing on `barrier` (which must expect the box's bytes). Coordinates are in elements,
// innermost first; parts of the box outside the tensor are written as zeros.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ void tma_load_3d(void* shared_dst, const CUtensorMap* map, int inner,
                                            int outer, int batch, uint64_t* barrier) {
#if OPGEN_TC_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4}], [%5];\n" ::"r"(shared_address(shared_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(inner), "r"(outer), "r"(batch),
      "r"(shared_address(barrier))
      : "memory");
#endif
}

// The host side of TMA: a tensor map of a (batch, outer, inner) array of 16-bit elements (inner
// contiguous; strides in elements, multiples of 8 = 16 bytes; base 16-byte aligned), read in
// boxes of box_outer x box_inner with the 128-byte swizzle (box_inner * 2 <= 128). The driver's
// cuTensorMapEncodeTiled is reached through the runtime (cudaGetDriverEntryPoint), so nothing
// links against libcuda. false when the driver refuses the layout (the caller takes another path).
inline bool encode_tensor_map(CUtensorMap& map, CUtensorMapDataType type, const void* base,
                              uint64_t inner, uint64_t outer, uint64_t batches, uint64_t row_stride,
                              uint64_t batch_stride, uint32_t box_inner, uint32_t box_outer) {
  using Encode = decltype(&cuTensorMapEncodeTiled);
  static const Encode encode = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t error = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function,
                                                               12000, cudaEnableDefault, &found);
#else
    const cudaError_t error =
        cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &function, cudaEnableDefault, &found);
#endif
    if (error != cudaSuccess || found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      function = nullptr;
    }
    return reinterpret_cast<Encode>(function);
  }();
  if (encode == nullptr || row_stride == 0 || (batches > 1 && batch_stride == 0)) return false;
  const cuuint64_t dims[3] = {inner, outer, batches};
  // The batch stride of a single batch is never stepped; any legal value serves.
  const uint64_t batch_bytes =
      batches > 1 ? batch_stride * 2 : (row_stride * outer * 2 + 15) / 16 * 16;
  const cuuint64_t strides[2] = {row_stride * 2, batch_bytes};
  const cuuint32_t box[3] = {box_inner, box_outer, 1};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  return encode(&map, type, 3, const_cast<void*>(base), dims, strides, box, element_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace tc
}  // namespace opgen

#undef OPGEN_TC_UNSUPPORTED
