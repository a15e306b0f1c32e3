// The fused MLP's forward on Hopper (sm_90a: H100, H200), with warpgroup MMAs (wgmma). The same
// network walk as opgen/mlp.cuh's forward_kernel, four warps at a time: a warpgroup carries 64
// rows (16 a warp, as there) through every layer, and each layer is a chain of wgmma.m64nNk16
// (bfloat16, float16) or m64nNk8 (tf32) over the layer's k, N = half the layer's padded output
// width. mma.sync (the kernel in mlp.cuh) reads a B fragment per 16 rows from shared memory and
// issues one instruction per 16x8x16; wgmma reads B once for 64 rows and many output tiles per
// instruction, which takes the forward past mma.sync's issue limit (and tf32, whose mma.sync rate
// is half bfloat16's, off it).
//
//   * A (the activations) comes from registers: wgmma's register A fragment is, warp by warp,
//     mma.sync's (rows 16 w .. 16 w + 15 of the 64 for warp w of the warpgroup), and its
//     accumulator is mma.sync's accumulator tile by tile, so mlp.cuh's Operand/put turn a layer's
//     output into the next layer's A exactly as there (tf32 with the same column permutation).
//     The first layer's A, x, comes from shared memory instead (16-bit types whose rows are whole
//     4-byte pieces: Plan::kSharedX): each warp's 16 rows land by cp.async in the weights' layout
//     below, a warpgroup's 64 rows a tile, two tiles where they fit so that the next tile's rows
//     arrive while this one is computed; no instruction turns x into an operand.
//   * B (the weights) is staged once per block, every layer resident, in wgmma's K-major layout
//     with the 128-byte swizzle: a layer [n][k] is cut into slices of 128 bytes of k (64 16-bit
//     values, 32 floats); a slice is n rows of 128 bytes whose 16-byte chunks are XOR-ed with
//     n % 8, 8 rows = 1024 bytes apart (the descriptor's stride), each slice 1024-byte aligned.
//     k is padded to whole slices (zero weights) and n to 16, 32, 64 or 128 (padded()). Each
//     thread loads its share of every layer in 16-byte chunks first, then places them: one round
//     trip to memory a block.
//   * A layer's output columns are two halves, two commit groups: the second half multiplies
//     while the first half's epilogue (bias, activation, conversion, stores) runs.
//   * Otherwise x arrives as in mlp.cuh: each warp's next 16 rows by cp.async while it computes
//     the current ones. y leaves straight from the accumulators, and what the forward keeps (for
//     the backward: Saved, in the same columns) through the same per-warp SavedTile, in 16-byte
//     chunks; inference has a kernel of its own, without any of that.
//   * A block is 2 to 4 warpgroups (by the registers of a layer's A and accumulators, up to
//     64 + 64 a thread in tf32 at width 128), one block a multiprocessor; while one warpgroup runs
//     its epilogue, another's MMAs run.
//
// Built only in a device pass for sm_90a (OPGEN_TC_WGMMA). forward_hopper (called first by
// mlp.cuh's forward) takes this path where the image has it, the device is a 9.0 one, the
// activations are ReLU or identity, every layer is at most 128 wide and all the weights fit in
// shared memory, and returns false otherwise (mlp.cuh's kernels run then).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "opgen/mlp.cuh"
#include "opgen/tensor_core.cuh"

namespace opgen::mlp {
namespace hopper {

// One wgmma: D (64 x kN float; thread t holds d[4 j + i] at row 16 (t / 32) +
// accumulator_coord(t % 32, i).row, column 8 j + accumulator_coord(t % 32, i).col) = A B, + D where
// `accumulate`; B from shared memory (descriptor `desc`), A either from registers (4 a thread) or
// from shared memory (a descriptor). One macro per N: inline PTX needs its operands spelled out; A
// is the last operand (A_OPERAND names it, from %(kN / 2 + 2) on; the inputs after the macro's
// arguments), so that both forms share the rest.
#define OPGEN_MLP_WGMMA_N16(K, TYPES, A_OPERAND, TAIL, ...)                                 \
  asm volatile(                                                                             \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, "                                               \
      "0;\nwgmma.mma_async.sync.aligned.m64n16" K ".f32." TYPES                             \
      " {%0, %1, %2, %3, %4, %5, %6, %7}, " A_OPERAND ", %8, p, 1, 1" TAIL ";\n}\n"         \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
        "+f"(d[7])                                                                          \
      : "l"(desc), "r"(static_cast<int>(accumulate)), __VA_ARGS__)

#define OPGEN_MLP_WGMMA_N32(K, TYPES, A_OPERAND, TAIL, ...)                                     \
  asm volatile(                                                                                 \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %17, "                                                  \
      "0;\nwgmma.mma_async.sync.aligned.m64n32" K ".f32." TYPES                                 \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "                               \
      "%13, %14, %15}, " A_OPERAND ", %16, p, 1, 1" TAIL ";\n}\n"                               \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),     \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
        "+f"(d[14]), "+f"(d[15])                                                                \
      : "l"(desc), "r"(static_cast<int>(accumulate)), __VA_ARGS__)

#define OPGEN_MLP_WGMMA_N64(K, TYPES, A_OPERAND, TAIL, ...)                                        \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %33, "                                                     \
      "0;\nwgmma.mma_async.sync.aligned.m64n64" K ".f32." TYPES                                    \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "                        \
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "                     \
      "%29, %30, %31}, " A_OPERAND ", %32, p, 1, 1" TAIL ";\n}\n"                                  \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                         \
      : "l"(desc), "r"(static_cast<int>(accumulate)), __VA_ARGS__)

#define OPGEN_MLP_WGMMA_N128(K, TYPES, A_OPERAND, TAIL, ...)                                       \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %65, "                                                     \
      "0;\nwgmma.mma_async.sync.aligned.m64n128" K ".f32." TYPES                                   \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "                        \
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "                     \
      "%29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, "                     \
      "%43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "                     \
      "%57, %58, %59, %60, %61, %62, %63}, " A_OPERAND ", %64, p, 1, 1" TAIL ";\n}\n"              \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), \
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), \
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), \
        "+f"(d[63])                                                                                \
      : "l"(desc), "r"(static_cast<int>(accumulate)), __VA_ARGS__)

// The element types' spelling: k of one MMA and the A and B types. 16-bit types take the
// transposition flags (0: both K-major) after the scales, tf32 has none.
#define OPGEN_MLP_WGMMA_TYPED(N, A_OPERAND, TAIL16, ...)                      \
  if constexpr (std::is_same_v<T, c10::BFloat16>) {                           \
    OPGEN_MLP_WGMMA_N##N("k16", "bf16.bf16", A_OPERAND, TAIL16, __VA_ARGS__); \
  } else if constexpr (std::is_same_v<T, c10::Half>) {                        \
    OPGEN_MLP_WGMMA_N##N("k16", "f16.f16", A_OPERAND, TAIL16, __VA_ARGS__);   \
  } else {                                                                    \
    OPGEN_MLP_WGMMA_N##N("k8", "tf32.tf32", A_OPERAND, "", __VA_ARGS__);      \
  }

// A from registers: mma.sync's A fragment, warp by warp (a[0..3]).
template <typename T, int kN>
__device__ __forceinline__ void wgmma(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t desc,
                                      bool accumulate) {
  static_assert(kN == 16 || kN == 32 || kN == 64 || kN == 128, "a padded layer width");
#if OPGEN_TC_WGMMA
  if constexpr (kN == 16) {
    OPGEN_MLP_WGMMA_TYPED(16, "{%10, %11, %12, %13}", ", 0", "r"(a[0]), "r"(a[1]), "r"(a[2]),
                          "r"(a[3]))
  } else if constexpr (kN == 32) {
    OPGEN_MLP_WGMMA_TYPED(32, "{%18, %19, %20, %21}", ", 0", "r"(a[0]), "r"(a[1]), "r"(a[2]),
                          "r"(a[3]))
  } else if constexpr (kN == 64) {
    OPGEN_MLP_WGMMA_TYPED(64, "{%34, %35, %36, %37}", ", 0", "r"(a[0]), "r"(a[1]), "r"(a[2]),
                          "r"(a[3]))
  } else {
    OPGEN_MLP_WGMMA_TYPED(128, "{%66, %67, %68, %69}", ", 0", "r"(a[0]), "r"(a[1]), "r"(a[2]),
                          "r"(a[3]))
  }
#endif
}

// A from shared memory (descriptor `a_desc`: K-major, 128-byte swizzle, as the weights), 16-bit
// types only here (tf32 would read the floats truncated, not rounded as the register path does).
template <typename T, int kN>
__device__ __forceinline__ void wgmma_shared_a(float (&d)[kN / 2], uint64_t a_desc, uint64_t desc,
                                               bool accumulate) {
  static_assert(kN == 16 || kN == 32 || kN == 64 || kN == 128, "a padded layer width");
  static_assert(!std::is_same_v<T, float>, "16-bit types");
#if OPGEN_TC_WGMMA
  if constexpr (kN == 16) {
    OPGEN_MLP_WGMMA_TYPED(16, "%10", ", 0, 0", "l"(a_desc))
  } else if constexpr (kN == 32) {
    OPGEN_MLP_WGMMA_TYPED(32, "%18", ", 0, 0", "l"(a_desc))
  } else if constexpr (kN == 64) {
    OPGEN_MLP_WGMMA_TYPED(64, "%34", ", 0, 0", "l"(a_desc))
  } else {
    OPGEN_MLP_WGMMA_TYPED(128, "%66", ", 0, 0", "l"(a_desc))
  }
#endif
}
#undef OPGEN_MLP_WGMMA_TYPED
#undef OPGEN_MLP_WGMMA_N16
#undef OPGEN_MLP_WGMMA_N32
#undef OPGEN_MLP_WGMMA_N64
#undef OPGEN_MLP_WGMMA_N128

// Keeps the compiler from moving reads or writes of a register the MMAs use (an accumulator, or A,
// which they read until they complete) across the wgmma fences and waits, which name none.
__device__ __forceinline__ void pin(float& value) {
  asm volatile("" : "+f"(value)::"memory");
}
__device__ __forceinline__ void pin(uint32_t& value) {
  asm volatile("" : "+r"(value)::"memory");
}

// Orders this thread's ordinary shared-memory writes (the staged weights) before the async proxy's
// reads (wgmma's B); the __syncthreads() after it does the rest.
__device__ __forceinline__ void fence_shared_for_async() {
#if OPGEN_TC_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

constexpr int kRowsPerWarpgroup = 4 * kRowsPerWarp;

// The 128 threads of warpgroup g (of a block's) meet: named barrier 1 + g (0 is __syncthreads').
__device__ __forceinline__ void warpgroup_barrier(int g) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(1 + g) : "memory");
}

// The network's shapes as this kernel pads them, and its shared memory: the weights (every layer,
// 1024-byte aligned slices), with kSharedX each warpgroup's two x tiles, the biases (float), then
// each warp's x buffer (16 rows; without kSharedX) and, with kStage, its SavedTile.
template <typename T, class Net, int kStageElements>
struct Plan {
  static constexpr int kLayers = Net::kLayers;
  static constexpr int kSlice = 128 / static_cast<int>(sizeof(T));  // k of one swizzle span
  static constexpr int kStepK = tc::Mma<T>::kK;                     // k of one wgmma: 16 or 8
  __host__ __device__ static constexpr int k_width(int l) {         // layer l's padded k
    return (padded(Net::width(l)) + kSlice - 1) / kSlice * kSlice;
  }
  __host__ __device__ static constexpr int n_width(int l) { return padded(Net::width(l + 1)); }
  __host__ __device__ static constexpr int max_k() {
    int m = 0;
    for (int l = 0; l < kLayers; ++l) m = k_width(l) > m ? k_width(l) : m;
    return m;
  }
  __host__ __device__ static constexpr int max_n() {
    int m = 0;
    for (int l = 0; l < kLayers; ++l) m = n_width(l) > m ? n_width(l) : m;
    return m;
  }
  __host__ __device__ static constexpr int64_t weight_offset(int l) {  // bytes
    int64_t offset = 0;
    for (int i = 0; i < l; ++i) offset += int64_t(n_width(i)) * k_width(i) * int64_t(sizeof(T));
    return offset;
  }
  static constexpr int64_t kWeightBytes = weight_offset(kLayers);
  // x as the first layer's A operand straight from shared memory (16-bit types whose rows are
  // whole 4-byte pieces, copied by cp.async in 16-, 8- or 4-byte pieces into the weights' K-major
  // swizzled layout: a warpgroup's 64 rows a slice, warp w's at rows 16 w; two such tiles a
  // warpgroup, the next tile's rows landing in one while the other is read): no registers and no
  // instructions turn x into an operand. Where the two tiles do not fit, x comes through the
  // registers as the other layers' A. Not tf32: wgmma reads shared floats truncated to tf32, where
  // the register path rounds them as the GEMMs it is checked against do.
  static constexpr int kRowBytes = Net::width(0) * static_cast<int>(sizeof(T));
  static constexpr bool kSharedXType = !std::is_same_v<T, float> && kRowBytes % 4 == 0;
  static constexpr int kPiece = kRowBytes % 16 == 0 ? 16 : kRowBytes % 8 == 0 ? 8 : 4;
  static constexpr int64_t kXTileBytes = int64_t(k_width(0) / kSlice) * kRowsPerWarp * 4 * 128;
  static constexpr int64_t kBiasBytes = int64_t(kLayers) * max_n() * 4;
  static constexpr int64_t buffer_elements(bool shared_x) {  // a warp's x rows (without)
    return shared_x ? 0
                    : (int64_t(kRowsPerWarp) * Net::width(0) * int64_t(sizeof(T)) + 15) / 16 * 16 /
                          int64_t(sizeof(T));
  }
  // Warpgroups a block, by the registers a thread holds for a layer's A operand (the k steps it
  // multiplies) and accumulators, the most over the layers (ptxas, sm_90a, no spills):
  //   up to 64 (width 64):    4 warpgroups, 128 registers a thread (64x4: 48 in 16-bit, 98
  //                           registers; 64 in tf32, 105);
  //   up to 116 (width 128):  3, 168 registers (seed in 16-bit: 96, 167; in tf32: 52 + 64 = 116,
  //                           166: its first layer's 13 k steps of 16 leave it room);
  //   more (tf32, 128 wide):  2, 255 registers.
  // With x from shared memory the first layer's A takes no registers, and what they hold instead
  // is the next layer's A its epilogue builds (seed in 16-bit: 32 + 64; at 4 warpgroups and 128
  // registers it spilled).
  static constexpr int warpgroups(bool shared_x) {
    int m = 0;
    for (int l = 0; l < kLayers; ++l) {
      const int k = (Net::width(l) + kStepK - 1) / kStepK * kStepK;
      const int a = static_cast<int>(sizeof(T)) * (l == 0 && shared_x ? n_width(l) : k) / 8;
      m = a + n_width(l) / 2 > m ? a + n_width(l) / 2 : m;
    }
    return m <= 64 ? 4 : m <= 116 ? 3 : 2;
  }
  static constexpr int64_t bytes(bool shared_x) {
    const int64_t warps = 4 * warpgroups(shared_x);
    return 1024 + kWeightBytes + (shared_x ? warps / 4 * 2 * kXTileBytes : 0) + kBiasBytes +
           warps * (buffer_elements(shared_x) + kStageElements) * int64_t(sizeof(T));
  }
  static constexpr bool kSharedX = kSharedXType && bytes(true) <= kSharedBudget;
  static constexpr int kWarpgroups = warpgroups(kSharedX);
  static constexpr int kWarps = 4 * kWarpgroups;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int64_t kXBytes = kSharedX ? int64_t(kWarpgroups) * 2 * kXTileBytes : 0;
  static constexpr int64_t kBufferElements = buffer_elements(kSharedX);
  static constexpr int64_t kWarpElements = kBufferElements + kStageElements;
  static constexpr int64_t kBytes = bytes(kSharedX);
  // Every layer at most 128 wide (a warpgroup's A and accumulators in registers).
  static constexpr bool kFits = Net::max_padded() <= 128;
};

// Unsigned bits of kBytes bytes (2, 4, 8, 16): one load or store of that width.
template <int kBytes>
using BitsOf = std::conditional_t<
    kBytes == 16, uint4,
    std::conditional_t<kBytes == 8, uint2, std::conditional_t<kBytes == 4, uint32_t, uint16_t>>>;

// Every layer's weights W[n][k] into their slices, zero-padded, in one round trip to memory and
// whole 16-byte chunks of shared memory. A thread's unit of work is 8 consecutive k of one row n of
// a layer's padded [kN][kK]: one chunk in 16-bit types; in float (tf32) the two chunks of one
// group of 8, which hold logical k 0, 2, 4, 6 and 1, 3, 5, 7 (stored_column), each rounded to tf32.
// Each thread first loads the values of all its units of every layer (in the widest pieces that
// the rows' length and the tensor's alignment allow; zeros past the layer's own widths), runs
// `meanwhile` (the biases' loads join the same trip), then stores its chunks.
template <typename T, class Net, class P, class Meanwhile>
__device__ void stage_weights(unsigned char* base, const Params<T>& p, const Meanwhile& meanwhile) {
  constexpr int kLayers = Net::kLayers;
  constexpr int kSize = static_cast<int>(sizeof(T));
  // Units of layer l (a thread's: per_thread(l), from first_unit(l) on in its registers).
  constexpr auto units = [](int l) {
    return P::n_width(l) * (P::k_width(l) / 8);
  };
  constexpr auto per_thread = [units](int l) {
    return (units(l) + P::kThreads - 1) / P::kThreads;
  };
  constexpr auto first_unit = [per_thread](int l) {
    int at = 0;
    for (int i = 0; i < l; ++i) at += per_thread(i);
    return at;
  };
  constexpr int kUnits = first_unit(kLayers);
  alignas(16) T values[kUnits > 0 ? kUnits : 1][8];
  static_for<0, kLayers>([&](auto layer) {
    constexpr int l = decltype(layer)::value;
    constexpr int kOut = Net::width(l + 1), kIn = Net::width(l), kGroups = P::k_width(l) / 8;
    // The widest piece (elements) that divides a row, within a unit of 8 and 16 bytes.
    constexpr int kMaxPiece = 16 / kSize;
    constexpr int kPiece = kIn % kMaxPiece == 0             ? kMaxPiece
                           : kIn % 4 == 0 && 4 <= kMaxPiece ? 4
                           : kIn % 2 == 0                   ? 2
                                                            : 1;
    using Bits = BitsOf<kPiece * kSize>;
    const T* const w = p.weight[l];
    const bool aligned = reinterpret_cast<uintptr_t>(w) % (kPiece * kSize) == 0;
#pragma unroll
    for (int j = 0; j < per_thread(l); ++j) {
      T* const v = values[first_unit(l) + j];
      const int u = static_cast<int>(threadIdx.x) + j * P::kThreads;
      const int n = u / kGroups, k0 = (u % kGroups) * 8;
#pragma unroll
      for (int e = 0; e < 8; e += kPiece) {
        const bool inside = u < units(l) && n < kOut && k0 + e < kIn;  // a whole piece or none
        if (inside && aligned) {
          *reinterpret_cast<Bits*>(v + e) =
              *reinterpret_cast<const Bits*>(w + int64_t(n) * kIn + k0 + e);
        } else {
#pragma unroll
          for (int i = 0; i < kPiece; ++i) {
            v[e + i] = inside ? w[int64_t(n) * kIn + k0 + e + i] : static_cast<T>(0.f);
          }
        }
      }
    }
  });
  meanwhile();
  static_for<0, kLayers>([&](auto layer) {
    constexpr int l = decltype(layer)::value;
    constexpr int kN = P::n_width(l), kGroups = P::k_width(l) / 8;
#pragma unroll
    for (int j = 0; j < per_thread(l); ++j) {
      const int u = static_cast<int>(threadIdx.x) + j * P::kThreads;
      if (u >= units(l)) continue;
      const int n = u / kGroups, k0 = (u % kGroups) * 8;
      // The 16-byte chunk c (of 8 a 128-byte row) of row n of the slice holding k0.
      unsigned char* const row = base + P::weight_offset(l) + (k0 / P::kSlice) * kN * 128 + n * 128;
      const int c = (k0 % P::kSlice) * kSize / 16;
      const T* const v = values[first_unit(l) + j];
      if constexpr (std::is_same_v<T, float>) {
        const uint4 even =
            make_uint4(tc::to_tf32(v[0]), tc::to_tf32(v[2]), tc::to_tf32(v[4]), tc::to_tf32(v[6]));
        const uint4 odd =
            make_uint4(tc::to_tf32(v[1]), tc::to_tf32(v[3]), tc::to_tf32(v[5]), tc::to_tf32(v[7]));
        *reinterpret_cast<uint4*>(row + ((c ^ (n % 8)) * 16)) = even;
        *reinterpret_cast<uint4*>(row + (((c + 1) ^ (n % 8)) * 16)) = odd;
      } else {
        *reinterpret_cast<uint4*>(row + ((c ^ (n % 8)) * 16)) = *reinterpret_cast<const uint4*>(v);
      }
    }
  });
}

// The wgmma descriptor of layer l's B for k step kt (k = kt * kStepK .. + kStepK): the slice
// holding it, advanced by the step's bytes within the 128-byte row (the hardware applies the
// swizzle to the address it forms). `weights`: the descriptor of the weights' first byte; every
// offset here is a compile-time constant, so a descriptor is one add (tc::advance_descriptor).
template <class P, int kLayer>
__device__ __forceinline__ uint64_t descriptor(uint64_t weights, int kt, int n0) {
  constexpr int kN = P::n_width(kLayer);
  constexpr int kBytesPerK = 128 / P::kSlice;
  const int k = kt * P::kStepK;
  return tc::advance_descriptor(weights,
                                static_cast<uint32_t>(P::weight_offset(kLayer)) +
                                    static_cast<uint32_t>((k / P::kSlice) * kN * 128 + n0 * 128 +
                                                          (k % P::kSlice) * kBytesPerK));
}

template <typename T, class Net, Activation kHidden, Activation kOut, bool kStage>
using PlanOf =
    Plan<T, Net, kStage ? SavedTile<T, Saved<Net, kHidden, kOut>::columns()>::kElements : 0>;

// Whether the forward keeps what it saves in a per-warp shared tile (16-bit types, as mlp.cuh).
template <typename T, class Net, Activation kHidden, Activation kOut>
__host__ __device__ constexpr bool stages_saved() {
  using Tile = SavedTile<T, Saved<Net, kHidden, kOut>::columns()>;
  return !std::is_same_v<T, float> && Tile::kUsable &&
         PlanOf<T, Net, kHidden, kOut, true>::kBytes <= kSharedBudget;
}

template <typename T, class Net, Activation kHidden, Activation kOut, bool kStage>
constexpr int threads() {
  return PlanOf<T, Net, kHidden, kOut, kStage>::kThreads;
}

// Starts copying rows row0 .. row0 + valid - 1 of x into a warp's 16 rows of a warpgroup's x tile
// (kSharedX: `rows` is the tile's first slice at this warp's first row), each row's 16-byte chunks
// where the swizzle puts them: cp.async in P::kPiece-byte pieces where x is aligned to them, plain
// loads otherwise. One commit group, empty when there are no rows (the waits count groups).
template <typename T, class Net, class P>
__device__ __forceinline__ void fetch_x_tile(unsigned char* rows, const T* x, int64_t row0,
                                             int valid, bool aligned, int lane) {
  constexpr int kRowBytes = P::kRowBytes, kPiece = P::kPiece, kPieces = kRowBytes / kPiece;
  constexpr int kSliceBytes = kRowsPerWarp * 4 * 128;  // a warpgroup's 64 rows of one slice
  const auto at = [&](int r, int byte) {  // row r (of the warp's 16), byte of the padded row
    return rows + (byte / 128) * kSliceBytes + r * 128 + ((((byte % 128) / 16) ^ (r % 8)) * 16) +
           byte % 16;
  };
  const unsigned char* const first =
      reinterpret_cast<const unsigned char*>(x + row0 * Net::width(0));
  const auto copy = [&](int i) {  // piece i of the rows
    const int r = i / kPieces, byte = (i % kPieces) * kPiece;
    const uint32_t to = tc::shared_address(at(r, byte));
    const unsigned char* const from = first + r * kRowBytes + byte;
    if constexpr (kPiece == 16) {
      tc::cp_async_16(to, from, true);
    } else {
      tc::cp_async_piece<kPiece>(to, from, true);
    }
  };
  if (aligned && valid == kRowsPerWarp) {  // every tile but the last: a fixed count a lane
    constexpr int kAll = kRowsPerWarp * kPieces;
#pragma unroll
    for (int j = 0; j < (kAll + 31) / 32; ++j) {
      if (kAll % 32 == 0 || lane + 32 * j < kAll) copy(lane + 32 * j);
    }
  } else if (aligned) {
    for (int i = lane; i < valid * kPieces; i += 32) copy(i);
  } else {
    constexpr int kSize = static_cast<int>(sizeof(T));
    for (int i = lane; i < valid * Net::width(0); i += 32) {
      const int r = i / Net::width(0), byte = (i % Net::width(0)) * kSize;
      *reinterpret_cast<T*>(at(r, byte)) = x[row0 * Net::width(0) + i];
    }
  }
  tc::cp_async_commit();
}

// The forward: x (rows, widths[0]) -> y (rows, widths[L]), keeping `saved` (kKeep: it is set;
// without, the compiler drops every store and test of it). Block b's warpgroup g takes 64-row
// tile g * gridDim.x + b, then every gridDim.x * kWarpgroups-th: a pass hands every block's first
// warpgroup a tile before any block's second, so that a last, partial pass runs on every
// multiprocessor with fewer warpgroups each (they share its tensor cores and issue slots), not on
// a third of them with all their warpgroups (seed at 2^18 rows: 4096 tiles, 10.3 passes of 396).
template <typename T, class Net, Activation kHidden, Activation kOut, bool kBias, bool kStage,
          bool kKeep>
__global__ void OPGEN_WGMMA_LAUNCH_BOUNDS((threads<T, Net, kHidden, kOut, kStage>()))
    forward_kernel(const Params<T> params) {
#if OPGEN_TC_WGMMA
  static_assert(kKeep || !kStage, "a saved tile is for what the forward keeps");
  // A copy whose `saved` the compiler knows to be null without kKeep (only its fields named at
  // compile time are read: an array indexed at run time would take it to local memory).
  Params<T> p = params;
  if constexpr (!kKeep) p.saved = nullptr;
  using P = PlanOf<T, Net, kHidden, kOut, kStage>;
  constexpr int kLayers = Net::kLayers;
  constexpr int kInWidth = Net::width(0);
  constexpr int kMaxN = P::max_n();
  constexpr bool kSharedX = P::kSharedX;
  using Kept = Saved<Net, kHidden, kOut>;
  using Stage = SavedTile<T, Kept::columns()>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  unsigned char* const base =
      shared_bytes + ((1024 - tc::shared_address(shared_bytes) % 1024) % 1024);
  unsigned char* const x_tiles = base + P::kWeightBytes;  // kSharedX
  float* const biases = reinterpret_cast<float*>(base + P::kWeightBytes + P::kXBytes);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  const int warpgroup = warp / 4, warp_in_group = warp % 4;
  T* const buffer = reinterpret_cast<T*>(base + P::kWeightBytes + P::kXBytes + P::kBiasBytes) +
                    warp * P::kWarpElements;
  T* const stage = buffer + P::kBufferElements;  // kStage only
  const bool x_aligned = reinterpret_cast<uintptr_t>(p.x) % (kSharedX ? P::kPiece : 16) == 0;
  const bool saved_aligned = reinterpret_cast<uintptr_t>(p.saved) % 16 == 0;
  const int64_t stride = int64_t(gridDim.x) * P::kWarpgroups * kRowsPerWarpgroup;
  const auto rows_from = [&](int64_t row0) {
    return row0 < p.rows ? static_cast<int>(min(int64_t(kRowsPerWarp), p.rows - row0)) : 0;
  };
  const int64_t first_tile_row0 = (int64_t(warpgroup) * gridDim.x + blockIdx.x) * kRowsPerWarpgroup;
  // kSharedX: this warpgroup's x tile `b` (of 2).
  const auto x_tile = [&](int b) {
    return x_tiles + (2 * warpgroup + b) * P::kXTileBytes;
  };
  const auto fetch_x = [&](int b, int64_t tile_row0) {
    const int64_t row0 = tile_row0 + warp_in_group * kRowsPerWarp;
    fetch_x_tile<T, Net, P>(x_tile(b) + warp_in_group * kRowsPerWarp * 128, p.x, row0,
                            rows_from(row0), x_aligned, lane);
  };

  if constexpr (kSharedX) {
    // Zeros where no row of x lands (the padding past widths[0]: its weights are zero, but
    // 0 * NaN is not), then the first tile's rows are on their way while the block stages the
    // weights.
    for (int64_t i = threadIdx.x; i < P::kXBytes / 16; i += blockDim.x) {
      reinterpret_cast<uint4*>(x_tiles)[i] = make_uint4(0, 0, 0, 0);
    }
    __syncthreads();
    fetch_x(0, first_tile_row0);
  } else {
    // The first tile's rows are on their way while the block stages the weights.
    const int64_t row0 = first_tile_row0 + warp_in_group * kRowsPerWarp;
    if (row0 < p.rows) {
      fetch_rows<T, kInWidth>(buffer, p.x, row0, rows_from(row0), x_aligned, lane);
    }
  }
  stage_weights<T, Net, P>(base, params, [&] {  // while the weights' chunks are on their way
    for (int i = threadIdx.x; i < kLayers * kMaxN; i += blockDim.x) {
      const int l = i / kMaxN, n = i - l * kMaxN;
      biases[i] = (kBias && n < Net::width(l + 1)) ? static_cast<float>(params.bias[l][n]) : 0.f;
    }
  });
  fence_shared_for_async();
  __syncthreads();
  const uint64_t weights = tc::wgmma_descriptor(tc::shared_address(base), 16, 1024);

  int b = 0;  // kSharedX: the x tile this pass reads
  for (int64_t tile_row0 = first_tile_row0; tile_row0 < p.rows; tile_row0 += stride) {
    // Every warp of the warpgroup runs every wgmma (they are warpgroup-wide), rows or not.
    const int64_t row0 = tile_row0 + warp_in_group * kRowsPerWarp;
    const int valid = rows_from(row0);
    // Not zeroed (the zeros cost 53 CS2R a tile in tf32): a layer's MMAs read only the k steps its
    // input's padded width holds, and take_input_rows and put fill every one of them (zeros past
    // the widths); a warp without rows leaves h as it was, rows whose results no one stores.
    Operand<T, P::max_k()> h;
    // kSharedX: the descriptor of this tile's x, which every first-layer MMA advances.
    const uint64_t x_desc =
        kSharedX ? tc::wgmma_descriptor(tc::shared_address(x_tile(b)), 16, 1024) : 0;
    if constexpr (kSharedX) {
      // This tile's rows have landed: this warp's, then, after the fence and the warpgroup's
      // barrier, all four warps', for the async proxy. Past the barrier every warp is done with
      // the other x tile (the previous pass's MMAs completed): the next tile's rows fill it.
      tc::cp_async_wait<0>();
      fence_shared_for_async();
      warpgroup_barrier(warpgroup);
    } else if (valid > 0) {
      take_input_rows<T, kInWidth, false>(h, buffer, p, row0, valid, stride, x_aligned, lane,
                                          rows_from);
    }
    static_for<0, kLayers>([&](auto layer) {
      constexpr int l = decltype(layer)::value;
      constexpr int kN = P::n_width(l);
      // k steps up to the layer's own width, not its padded one: past it both operands are zeros
      // (seed's first layer, k = 100 of 128: 7 of 8 steps in 16-bit, 13 of 16 in tf32).
      constexpr int kSteps = (Net::width(l) + P::kStepK - 1) / P::kStepK;
      constexpr bool kLast = l + 1 == kLayers;
      constexpr bool kAShared = kSharedX && l == 0;
      // The layer's columns in two parts, each its own chain of MMAs (commit group): the second
      // part's MMAs run while the first part's epilogue does.
      constexpr int kParts = kN >= 32 ? 2 : 1, kPart = kN / kParts;
      float acc[kParts][kPart / 2];
      tc::wgmma_fence();  // the A registers were written by ordinary instructions
#pragma unroll
      for (int part = 0; part < kParts; ++part) {
#pragma unroll
        for (int kt = 0; kt < kSteps; ++kt) {
          const uint64_t b_desc = descriptor<P, l>(weights, kt, part * kPart);
          if constexpr (kAShared) {
            const int k = kt * P::kStepK;
            const uint64_t a_desc =
                tc::advance_descriptor(x_desc, (k / P::kSlice) * (kRowsPerWarpgroup * 128) +
                                                   (k % P::kSlice) * static_cast<int>(sizeof(T)));
            wgmma_shared_a<T, kPart>(acc[part], a_desc, b_desc, kt > 0);
          } else {
            wgmma<T, kPart>(acc[part], h.step[kt].reg, b_desc, kt > 0);
          }
        }
        tc::wgmma_commit();
      }
      // The next tile's rows start arriving while the first layer's MMAs run rather than before
      // they are issued: the fetch's address arithmetic (some 300 instructions a warp with x in
      // shared memory) is then off the tile's chain.
      if constexpr (l == 0) {
        if constexpr (kSharedX) {
          fetch_x(1 - b, tile_row0 + stride);
        } else if (valid > 0) {
          fetch_next_input_rows<T, kInWidth>(buffer, p, row0, stride, x_aligned, lane, rows_from);
        }
      }
      const float* bias = biases + l * kMaxN;
      const LayerOutputs<T, Net, kHidden, kOut, l, kStage> out(p);
      Operand<T, P::max_k()> next;  // every step the next layer reads is put below
#pragma unroll
      for (int part = 0; part < kParts; ++part) {
        if (part + 1 < kParts) {
          tc::wgmma_wait<1>();
        } else {
          tc::wgmma_wait<0>();
          if constexpr (!kAShared) {
            // The MMAs read h's registers until here: keep the compiler from reusing them.
#pragma unroll
            for (int s = 0; s < kSteps; ++s) {
#pragma unroll
              for (int r = 0; r < 4; ++r) pin(h.step[s].reg[r]);
            }
          }
        }
#pragma unroll
        for (int i = 0; i < kPart / 2; ++i) pin(acc[part][i]);
#pragma unroll
        for (int tp = 0; tp < kPart / 8; ++tp) {
          const int t = part * (kPart / 8) + tp;
          const float* const v = acc[part] + 4 * tp;
          const int col = 8 * t + 2 * quad;
          const float2 bias_pair = *reinterpret_cast<const float2*>(bias + col);
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int row = group + 8 * half;
            out.put_pair(next, stage, row0, row, col, t, half, row < valid,
                         v[2 * half] + bias_pair.x, v[2 * half + 1] + bias_pair.y);
          }
        }
      }
      if constexpr (!kLast) h = next;
    });
    if constexpr (kSharedX) b = 1 - b;
    if constexpr (kStage) {
      if (p.saved != nullptr && valid > 0) {
        __syncwarp();  // the whole tile is written
        Stage::flush(stage, p.saved, row0, valid, saved_aligned, lane);
        __syncwarp();  // and read, before the next tile's rows overwrite it
      }
    }
  }
#else
  __trap();  // never launched: the host checks wgmma_kernel_built first
#endif
}

// The persistent grid: as many blocks as fit on the device at once, but no more than there are
// 64-row tiles (with fewer tiles than warpgroups, each block's first warpgroup takes one before
// any second warpgroup does: see forward_kernel).
template <class P, typename Kernel>
inline int64_t persistent_blocks(Kernel kernel, int64_t rows) {
  const KernelFacts facts = kernel_facts(kernel, P::kThreads, P::kBytes);
  const int64_t tiles = (rows + kRowsPerWarpgroup - 1) / kRowsPerWarpgroup;
  return std::min<int64_t>(tiles, int64_t(facts.sms) * std::max(facts.blocks_per_sm, 1));
}

// Whether a kernel runs here: a 9.0 device, and the op built for sm_90a (a plain sm_90 image has an
// empty kernel). Asked once per (kernel, device).
template <typename Kernel>
inline bool available(Kernel kernel, int threads) {
  return once_per_kernel_and_device(kernel, [&](int device) {
    return tc::device_is_sm90(device) && tc::wgmma_kernel_built(kernel, threads);
  });
}

}  // namespace hopper

// The Hopper forward where it runs (see the header comment); false where it does not, and the
// caller takes mlp.cuh's kernels.
template <typename T, class Net, Activation kHidden, Activation kOut, bool kBias>
bool forward_hopper(const Params<T>& p, cudaStream_t stream) {
  // GELU and SiLU networks stay on mlp.cuh's kernel: their epilogues (a transcendental a value)
  // outweigh the MMAs, and there the mma.sync kernel's 16 warps, each interleaving its MMAs with
  // its epilogue, measured faster (H200, 17-128-33-128-64-128-128-100-5 tanh-GELU/SiLU in bfloat16:
  // 10.2 ms here against 8.7 ms at 2^22 rows).
  constexpr bool kCheapActivations =
      (kHidden == Activation::kRelu || kHidden == Activation::kNone) &&
      (kOut == Activation::kRelu || kOut == Activation::kNone);
  if constexpr (!hopper::Plan<T, Net, 0>::kFits || !kCheapActivations) {
    return false;
  } else {
    // Inference (nothing kept) has a kernel of its own, with no saved tile: a stage of the
    // epilogue's and the shared memory of its tiles fewer.
    if (p.saved == nullptr) {
      using P = hopper::PlanOf<T, Net, kHidden, kOut, false>;
      const auto kernel = hopper::forward_kernel<T, Net, kHidden, kOut, kBias, false, false>;
      if (P::kBytes > shared_limit() || !hopper::available(kernel, P::kThreads)) return false;
      launch<P::kWarps>(kernel, p, P::kBytes, stream, hopper::persistent_blocks<P>(kernel, p.rows));
      return true;
    }
    constexpr bool kStage = hopper::stages_saved<T, Net, kHidden, kOut>();
    using P = hopper::PlanOf<T, Net, kHidden, kOut, kStage>;
    const auto kernel = hopper::forward_kernel<T, Net, kHidden, kOut, kBias, kStage, true>;
    if (P::kBytes > shared_limit() || !hopper::available(kernel, P::kThreads)) return false;
    launch<P::kWarps>(kernel, p, P::kBytes, stream, hopper::persistent_blocks<P>(kernel, p.rows));
    return true;
  }
}

}  // namespace opgen::mlp
