// Tensor-core building blocks for sm_80 and newer (A100, H100/H200): shared-memory staging with
// cp.async, XOR-swizzled tiles, ldmatrix fragment loads and warp-level mma.sync. The tiled matmul
// and the fused MLP are made from these; a new tensor-core op should be too.
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

#include <cuda_runtime.h>

#include <cstdint>

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

// ---------------------------------------------------------------------------------------------
// Shared-memory addresses. ldmatrix and cp.async take 32-bit shared-window addresses.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t shared_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

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

// Copies 4 bytes (one float), zero-filled when !valid; for operands without 16-byte alignment.
__device__ __forceinline__ void cp_async_4(uint32_t shared_dst, const void* global_src,
                                           bool valid) {
#ifdef OPGEN_TC_UNSUPPORTED
  __trap();
#else
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_dst), "l"(global_src),
               "r"(src_bytes));
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

// A float rounded to tf32 (10-bit mantissa, round to nearest, ties away), as the tensor core reads
// it.
__device__ __forceinline__ uint32_t to_tf32(float x) {
#ifdef OPGEN_TC_UNSUPPORTED
  __trap();
  return 0;
#else
  uint32_t out;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(out) : "f"(x));
  return out;
#endif
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

#undef OPGEN_TC_UNSUPPORTED
