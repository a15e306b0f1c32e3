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
//   * B (the weights) is staged once per block, every layer resident, in wgmma's K-major layout
//     with the 128-byte swizzle: a layer [n][k] is cut into slices of 128 bytes of k (64 16-bit
//     values, 32 floats); a slice is n rows of 128 bytes whose 16-byte chunks are XOR-ed with
//     n % 8, 8 rows = 1024 bytes apart (the descriptor's stride), each slice 1024-byte aligned.
//     k is padded to whole slices (zero weights) and n to 16, 32, 64 or 128 (padded()).
//   * A layer's output columns are two halves, two commit groups: the second half multiplies
//     while the first half's epilogue (bias, activation, conversion, stores) runs.
//   * x arrives as in mlp.cuh: each warp's next 16 rows by cp.async while it computes the current
//     ones; y leaves straight from the accumulators, and what the forward keeps (for the backward:
//     Saved, in the same columns) through the same per-warp SavedTile, in 16-byte chunks.
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

#include <cstdint>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>

#include "opgen/mlp.cuh"
#include "opgen/tensor_core.cuh"

namespace opgen::mlp {
namespace hopper {

// One wgmma with A from registers (4 a thread) and B from shared memory (descriptor `desc`): D (64
// x kN float; thread t holds d[4 j + i] at row 16 (t / 32) + accumulator_coord(t % 32, i).row,
// column 8 j + accumulator_coord(t % 32, i).col) = A B, + D where `accumulate`. One macro per N:
// inline PTX needs its operands spelled out.
#define OPGEN_MLP_WGMMA_N16(K, TYPES, TAIL)                                                 \
  asm volatile(                                                                             \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %13, "                                              \
      "0;\nwgmma.mma_async.sync.aligned.m64n16" K ".f32." TYPES                             \
      " {%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, "                        \
      "p, 1, 1" TAIL ";\n}\n"                                                               \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
        "+f"(d[7])                                                                          \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(static_cast<int>(accumulate)))

#define OPGEN_MLP_WGMMA_N32(K, TYPES, TAIL)                                                     \
  asm volatile(                                                                                 \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, "                                                  \
      "0;\nwgmma.mma_async.sync.aligned.m64n32" K ".f32." TYPES                                 \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "                               \
      "%13, %14, %15}, {%16, %17, %18, %19}, %20, p, 1, 1" TAIL ";\n}\n"                        \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),     \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
        "+f"(d[14]), "+f"(d[15])                                                                \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(static_cast<int>(accumulate)))

#define OPGEN_MLP_WGMMA_N64(K, TYPES, TAIL)                                                        \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, "                                                     \
      "0;\nwgmma.mma_async.sync.aligned.m64n64" K ".f32." TYPES                                    \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "                        \
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "                     \
      "%29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1" TAIL ";\n}\n"                           \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),        \
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),    \
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])                                         \
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(static_cast<int>(accumulate)))

#define OPGEN_MLP_WGMMA_N128(K, TYPES, TAIL)                                                       \
  asm volatile(                                                                                    \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, "                                                     \
      "0;\nwgmma.mma_async.sync.aligned.m64n128" K ".f32." TYPES                                   \
      " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, "                        \
      "%15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, "                     \
      "%29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, "                     \
      "%43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, "                     \
      "%57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, "                      \
      "1" TAIL ";\n}\n"                                                                            \
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
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(static_cast<int>(accumulate)))

template <typename T, int kN>
__device__ __forceinline__ void wgmma(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t desc,
                                      bool accumulate) {
  static_assert(kN == 16 || kN == 32 || kN == 64 || kN == 128, "a padded layer width");
#if OPGEN_TC_WGMMA
#define OPGEN_MLP_WGMMA_TYPED(N)                       \
  if constexpr (std::is_same_v<T, c10::BFloat16>) {    \
    OPGEN_MLP_WGMMA_N##N("k16", "bf16.bf16", ", 0");   \
  } else if constexpr (std::is_same_v<T, c10::Half>) { \
    OPGEN_MLP_WGMMA_N##N("k16", "f16.f16", ", 0");     \
  } else {                                             \
    OPGEN_MLP_WGMMA_N##N("k8", "tf32.tf32", "");       \
  }
  if constexpr (kN == 16) {
    OPGEN_MLP_WGMMA_TYPED(16)
  } else if constexpr (kN == 32) {
    OPGEN_MLP_WGMMA_TYPED(32)
  } else if constexpr (kN == 64) {
    OPGEN_MLP_WGMMA_TYPED(64)
  } else {
    OPGEN_MLP_WGMMA_TYPED(128)
  }
#undef OPGEN_MLP_WGMMA_TYPED
#endif
}
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

// The network's shapes as this kernel pads them, and its shared memory: the weights (every layer,
// 1024-byte aligned slices), the biases (float), then each warp's x buffer (16 rows) and, with
// kStage, its SavedTile.
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
  static constexpr int64_t kBiasBytes = int64_t(kLayers) * max_n() * 4;
  static constexpr int64_t kBufferElements =
      (int64_t(kRowsPerWarp) * Net::width(0) * int64_t(sizeof(T)) + 15) / 16 * 16 /
      int64_t(sizeof(T));
  static constexpr int64_t kWarpElements = kBufferElements + kStageElements;
  // Warpgroups a block, by the registers a thread holds for a layer's A operand (max_k) and
  // accumulators (max_n): up to 64 (width 64), 4 warpgroups, 128 registers a thread (64x4: 92 in
  // 16-bit, 104 in tf32); up to 96 (width 128, 16-bit), 3, 168 registers (seed: 142); more (tf32 at
  // width 128), 2, 255 registers (seed: 178).
  static constexpr int kOperandRegisters = int(sizeof(T)) * max_k() / 8 + max_n() / 2;
  static constexpr int kWarpgroups = kOperandRegisters <= 64 ? 4 : kOperandRegisters <= 96 ? 3 : 2;
  static constexpr int kWarps = 4 * kWarpgroups;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int64_t kBytes =
      1024 + kWeightBytes + kBiasBytes + int64_t(kWarps) * kWarpElements * int64_t(sizeof(T));
  // Every layer at most 128 wide (a warpgroup's A and accumulators in registers).
  static constexpr bool kFits = Net::max_padded() <= 128;
};

// Layer l's weights W[n][k] into its slices (zero-padded; float rounded to tf32, its columns placed
// as mlp.cuh's stored_column places them, for the register A fragment's column order).
template <typename T, class Net, class P, int kLayer>
__device__ void stage_layer(unsigned char* base, const T* weight) {
  constexpr int kOut = Net::width(kLayer + 1), kIn = Net::width(kLayer);
  constexpr int kN = P::n_width(kLayer), kK = P::k_width(kLayer);
  constexpr int kTotal = kN * kK, kBatch = 8;
  unsigned char* tile = base + P::weight_offset(kLayer);
  for (int i0 = threadIdx.x; i0 < kTotal; i0 += blockDim.x * kBatch) {
    T v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = i0 + j * blockDim.x;
      const int n = i / kK, k = i % kK;
      v[j] = (i < kTotal && n < kOut && k < kIn) ? weight[n * kIn + k] : static_cast<T>(0.f);
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = i0 + j * blockDim.x;
      if (i >= kTotal) continue;
      const int n = i / kK, k = stored_column<T>(i % kK);
      const int slice = k / P::kSlice, byte = (k % P::kSlice) * static_cast<int>(sizeof(T));
      const int at = slice * kN * 128 + n * 128 + (((byte / 16) ^ (n % 8)) * 16) + byte % 16;
      if constexpr (std::is_same_v<T, float>) {
        *reinterpret_cast<float*>(tile + at) = __uint_as_float(tc::to_tf32(v[j]));
      } else {
        *reinterpret_cast<T*>(tile + at) = v[j];
      }
    }
  }
}

// The wgmma descriptor of layer l's B for k step kt (k = kt * kStepK .. + kStepK): the slice
// holding it, advanced by the step's bytes within the 128-byte row (the hardware applies the
// swizzle to the address it forms).
template <class P, int kLayer>
__device__ __forceinline__ uint64_t descriptor(uint32_t weights, int kt, int n0) {
  constexpr int kN = P::n_width(kLayer);
  constexpr int kBytesPerK = 128 / P::kSlice;
  const int k = kt * P::kStepK;
  const uint32_t at =
      weights + static_cast<uint32_t>(P::weight_offset(kLayer)) +
      static_cast<uint32_t>((k / P::kSlice) * kN * 128 + n0 * 128 + (k % P::kSlice) * kBytesPerK);
  return tc::wgmma_descriptor(at, 16, 1024);
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

// The forward: x (rows, widths[0]) -> y (rows, widths[L]), keeping `saved` when it is set. Block
// b's warpgroup g takes 64-row tiles b * kWarpgroups + g, then every gridDim.x * kWarpgroups-th.
template <typename T, class Net, Activation kHidden, Activation kOut, bool kBias, bool kStage>
__global__ void OPGEN_WGMMA_LAUNCH_BOUNDS((threads<T, Net, kHidden, kOut, kStage>()))
    forward_kernel(const Params<T> p) {
#if OPGEN_TC_WGMMA
  using P = PlanOf<T, Net, kHidden, kOut, kStage>;
  constexpr int kLayers = Net::kLayers;
  constexpr int kInWidth = Net::width(0);
  constexpr int kMaxN = P::max_n();
  using Kept = Saved<Net, kHidden, kOut>;
  using Stage = SavedTile<T, Kept::columns()>;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  unsigned char* const base =
      shared_bytes + ((1024 - tc::shared_address(shared_bytes) % 1024) % 1024);
  float* const biases = reinterpret_cast<float*>(base + P::kWeightBytes);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  const int warpgroup = warp / 4, warp_in_group = warp % 4;
  T* const buffer =
      reinterpret_cast<T*>(base + P::kWeightBytes + P::kBiasBytes) + warp * P::kWarpElements;
  T* const stage = buffer + P::kBufferElements;  // kStage only
  const bool x_aligned = reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
  const bool saved_aligned = reinterpret_cast<uintptr_t>(p.saved) % 16 == 0;
  const int64_t stride = int64_t(gridDim.x) * P::kWarpgroups * kRowsPerWarpgroup;
  const auto rows_from = [&](int64_t row0) {
    return row0 < p.rows ? static_cast<int>(min(int64_t(kRowsPerWarp), p.rows - row0)) : 0;
  };
  const int64_t first_tile_row0 =
      (int64_t(blockIdx.x) * P::kWarpgroups + warpgroup) * kRowsPerWarpgroup;

  // The first tile's rows are on their way while the block stages the weights.
  {
    const int64_t row0 = first_tile_row0 + warp_in_group * kRowsPerWarp;
    if (row0 < p.rows) {
      fetch_rows<T, kInWidth>(buffer, p.x, row0, rows_from(row0), x_aligned, lane);
    }
  }
  for (int i = threadIdx.x; i < kLayers * kMaxN; i += blockDim.x) {
    const int l = i / kMaxN, n = i - l * kMaxN;
    biases[i] = (kBias && n < Net::width(l + 1)) ? static_cast<float>(p.bias[l][n]) : 0.f;
  }
  static_for<0, kLayers>([&](auto layer) {
    constexpr int l = decltype(layer)::value;
    stage_layer<T, Net, P, l>(base, p.weight[l]);
  });
  fence_shared_for_async();
  __syncthreads();
  const uint32_t weights = tc::shared_address(base);

  for (int64_t tile_row0 = first_tile_row0; tile_row0 < p.rows; tile_row0 += stride) {
    // Every warp of the warpgroup runs every wgmma (they are warpgroup-wide), rows or not.
    const int64_t row0 = tile_row0 + warp_in_group * kRowsPerWarp;
    const int valid = rows_from(row0);
    Operand<T, P::max_k()> h{};
    if (valid > 0) {
      take_input_rows<T, kInWidth>(h, buffer, p, row0, valid, stride, x_aligned, lane, rows_from);
    }
    static_for<0, kLayers>([&](auto layer) {
      constexpr int l = decltype(layer)::value;
      constexpr int kK = P::k_width(l), kN = P::n_width(l);
      constexpr bool kLast = l + 1 == kLayers;
      // The layer's columns in two parts, each its own chain of MMAs (commit group): the second
      // part's MMAs run while the first part's epilogue does.
      constexpr int kParts = kN >= 32 ? 2 : 1, kPart = kN / kParts;
      float acc[kParts][kPart / 2];
      tc::wgmma_fence();  // the A registers were written by ordinary instructions
#pragma unroll
      for (int part = 0; part < kParts; ++part) {
#pragma unroll
        for (int kt = 0; kt < kK / P::kStepK; ++kt) {
          wgmma<T, kPart>(acc[part], h.step[kt].reg, descriptor<P, l>(weights, kt, part * kPart),
                          kt > 0);
        }
        tc::wgmma_commit();
      }
      const float* bias = biases + l * kMaxN;
      const LayerOutputs<T, Net, kHidden, kOut, l, kStage> out(p);
      Operand<T, P::max_k()> next{};
#pragma unroll
      for (int part = 0; part < kParts; ++part) {
        if (part + 1 < kParts) {
          tc::wgmma_wait<1>();
        } else {
          tc::wgmma_wait<0>();
          // The MMAs read h's registers until here: keep the compiler from reusing them.
#pragma unroll
          for (int s = 0; s < kK / P::kStepK; ++s) {
#pragma unroll
            for (int r = 0; r < 4; ++r) pin(h.step[s].reg[r]);
          }
        }
#pragma unroll
        for (int i = 0; i < kPart / 2; ++i) pin(acc[part][i]);
#pragma unroll
        for (int tp = 0; tp < kPart / 8; ++tp) {
          const int t = part * (kPart / 8) + tp;
          const float* const v = acc[part] + 4 * tp;
          const int col = 8 * t + 2 * quad;
          const float2 b = *reinterpret_cast<const float2*>(bias + col);
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int row = group + 8 * half;
            out.put_pair(next, stage, row0, row, col, t, half, row < valid, v[2 * half] + b.x,
                         v[2 * half + 1] + b.y);
          }
        }
      }
      if constexpr (!kLast) h = next;
    });
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

// Whether a kernel runs here: a 9.0 device, and the op built for sm_90a (a plain sm_90 image has an
// empty kernel). Asked once per (kernel, device).
template <typename Kernel>
inline bool available(Kernel kernel, int threads) {
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, bool> known;
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  const std::pair<int, const void*> key{device, reinterpret_cast<const void*>(kernel)};
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = known.find(key);
  if (found != known.end()) return found->second;
  const bool yes = tc::device_is_sm90(device) && tc::wgmma_kernel_built(kernel, threads);
  known.emplace(key, yes);
  return yes;
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
    constexpr bool kStage = hopper::stages_saved<T, Net, kHidden, kOut>();
    using P = hopper::PlanOf<T, Net, kHidden, kOut, kStage>;
    const auto kernel = hopper::forward_kernel<T, Net, kHidden, kOut, kBias, kStage>;
    if (P::kBytes > shared_limit() || !hopper::available(kernel, P::kThreads)) return false;
    launch<P::kWarps>(kernel, p, P::kBytes, stream);
    return true;
  }
}

}  // namespace opgen::mlp
