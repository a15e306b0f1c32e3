// The fully fused MLP (the mlp layout): the whole network in one kernel, forward, and one for the
// input gradient, after the idea of tiny-cuda-nn's "fully fused" networks (Müller et al. 2021):
// for narrow layers the weights fit in shared memory and a warp's rows stay on chip through every
// layer, so the network costs about one read of x and one write of y.
//
//   * One block a multiprocessor (a persistent grid) stages every layer's weights once into
//     swizzled shared tiles (opgen/tensor_core.cuh); its warps then walk rows, 16 a warp at a
//     time. Where all the weights do not fit (wide, deep float32 networks) a block stages one layer
//     at a time instead, per block of rows, and the warps step through the layers together.
//   * A warp's activations stay in registers from layer to layer: the float accumulator of an
//     m16n8 MMA holds, per thread, the same rows and column pairs that the next layer's A
//     fragment wants, so a layer's output becomes the next layer's input by a conversion, with no
//     shared-memory round trip (for tf32, whose A fragment holds columns k and k+4 where the
//     accumulator holds 2k and 2k+1, the weights' columns are permuted within each group of 8
//     when staged, which renumbers k to match). A layer's output tiles are computed 4 at a time
//     (32 columns) and turned into the next operand at once (Operand, warp_layer), so a thread
//     holds two operands (16-bit: packed pairs, 32 registers each at width 128) and few
//     accumulators: 16 warps a block fit in 128 registers a thread.
//   * Memory latency hides behind the MMAs: each warp's next 16 rows of x (of the output gradient,
//     and of what the forward kept, in the backward) are on their way with cp.async while it
//     computes the current ones. What the forward keeps leaves through a shared tile a warp, in
//     16-byte chunks (SavedTile), where it fits.
//   * Widths are padded inside (zero weights, zero bias) to 16, 32, 64 or 128, the swizzled
//     tiles' row lengths; the user's tensors are read and written at their own widths.
//   * bfloat16/float16 multiply in their own type with float accumulation, rounding each layer's
//     output to the type as eager PyTorch does; float32 multiplies in tf32 (only called where
//     allow_tf32 permits it) and keeps float activations.
//
// The backward kernel reads what the forward kept (opgen/mlp.h: each hidden output and, for GELU
// and SiLU, the pre-activations), carries the gradient from the output to x through the
// transposed weights the same way, and writes x's gradient and, per block, the column sums of
// each layer's pre-activation gradient G_l (the bias gradients, added across blocks by
// opgen/reduce.cuh's sum_partials). For 16-bit types, where its tiles fit (FusedPlan), it also
// adds each block's rows into the weight gradients G_l^T a_{l-1} on tensor cores (WeightGrads),
// one partial per block summed the same way, and no G_l leaves the chip; elsewhere it writes
// every G_l and the weight gradients are one GEMM a layer (cuBLASLt's or ATen's, whichever is
// faster for the problem: weight_gradient), but for float32 (TF32) networks with no output
// activation and an output of at most 16, whose last layer's weight gradient the kernel adds up
// itself (last_weights_in_kernel). Deterministic throughout: fixed orders, no atomics.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "opgen/activations.cuh"
#include "opgen/launch.cuh"
#include "opgen/mlp.h"
#include "opgen/reduce.cuh"
#include "opgen/tensor_core.cuh"

namespace opgen::mlp {

// A width padded to a swizzled tile's row: 16, 32, 64 or 128.
__host__ __device__ constexpr int padded(int width) {
  int p = 16;
  while (p < width) p *= 2;
  return p;
}

// The network's widths as compile-time constants (the op's own, from its spec).
template <int... kW>
struct Widths {
  static constexpr int kLayers = sizeof...(kW) - 1;
  // Folds over the pack rather than an array: device code may index them at run time.
  __host__ __device__ static constexpr int width(int i) {
    int index = 0, result = 0;
    ((result = index++ == i ? kW : result), ...);
    return result;
  }
  __host__ __device__ static constexpr int max_padded() {
    int m = 0;
    ((m = padded(kW) > m ? padded(kW) : m), ...);
    return m;
  }
  __host__ __device__ static constexpr int max_width() {
    int m = 0;
    ((m = kW > m ? kW : m), ...);
    return m;
  }
  static_assert(sizeof...(kW) >= 3 && sizeof...(kW) <= 9, "an MLP has 2 to 8 layers");
};

// The activation's math (opgen/activations.cuh) for this network's Activation.
template <Activation kAct>
using ActivationMath = std::conditional_t<
    kAct == Activation::kRelu, activations::Relu,
    std::conditional_t<
        kAct == Activation::kGelu, activations::Gelu,
        std::conditional_t<kAct == Activation::kGeluTanh, activations::GeluTanh,
                           std::conditional_t<kAct == Activation::kSilu, activations::Silu,
                                              activations::Identity>>>>;

template <Activation kAct>
__device__ __forceinline__ float activate(float z) {
  return ActivationMath<kAct>::forward(z);
}

// d act / dz, from z (GELU, SiLU) or from the output a (ReLU: a > 0 where it passes).
template <Activation kAct>
__device__ __forceinline__ float derivative(float z_or_a) {
  return ActivationMath<kAct>::derivative(z_or_a);
}

// Two floats as one register of two 16-bit values (the lower column in the low half).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// A value as the element type would round it (16-bit types), or unchanged (float).
template <typename T>
__device__ __forceinline__ float round_to(float v) {
  return static_cast<float>(static_cast<T>(v));
}

// The physical column within a group of 8 where the staged weights hold logical column k
// (tf32 only; see the header comment): logical 2c -> c, 2c+1 -> c+4.
template <typename T>
__host__ __device__ constexpr int stored_column(int k) {
  if constexpr (std::is_same_v<T, float>) {
    return (k & ~7) | ((k & 7) / 2 + 4 * (k & 1));
  } else {
    return k;
  }
}

// Two 16-bit values of one register as floats (the low half is the lower column).
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t bits) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&bits));
  } else {
    return __half22float2(*reinterpret_cast<const __half2*>(&bits));
  }
}

// ReLU of both 16-bit values of a register (rounding first and then clamping at zero is what
// eager's GEMM and ReLU do, one after the other).
template <typename T>
__device__ __forceinline__ uint32_t relu2(uint32_t bits) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    const __nv_bfloat162 v =
        __hmax2(*reinterpret_cast<const __nv_bfloat162*>(&bits), __float2bfloat162_rn(0.f));
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    const __half2 v = __hmax2(*reinterpret_cast<const __half2*>(&bits), __float2half2_rn(0.f));
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}

// One warp's 16 rows as the A operand of each k-step of a layer (tensor_core.cuh's FragmentA):
// 16-bit types as packed pairs (m16n8k16), float as tf32 (m16n8k8). The accumulator of an m16n8
// output tile t holds, per thread, columns 8t + 2*quad_lane + {0, 1} of row `group` (half 0) and
// of row group + 8 (half 1): `put` writes such a pair where the next layer's A fragment wants it,
// so a layer's output becomes the next one's operand without leaving registers.
template <typename T, int kWidth>
struct Operand {
  tc::FragmentA step[kWidth / tc::Mma<T>::kK];
};

// kNotNan: lo and hi are never NaNs (an activation's kNeverNan), so tf32 takes one integer add a
// value (tc::to_tf32_not_nan, which rounds ties away from zero, not to even).
template <typename T, int kWidth, bool kNotNan = false>
__device__ __forceinline__ void put(Operand<T, kWidth>& a, int t, int half, float lo, float hi) {
  if constexpr (std::is_same_v<T, float>) {
    const auto tf32 = [](float v) {
      return kNotNan ? tc::to_tf32_not_nan(v) : tc::to_tf32(v);
    };
    a.step[t].reg[half] = tf32(lo);      // physical column quad_lane: logical 2*quad_lane
    a.step[t].reg[2 + half] = tf32(hi);  // physical quad_lane + 4: logical 2*quad_lane + 1
  } else {
    a.step[t / 2].reg[2 * (t % 2) + half] = pack2<T>(lo, hi);
  }
}

// The same for a pair already packed (16-bit types).
template <typename T, int kWidth>
__device__ __forceinline__ void put_bits(Operand<T, kWidth>& a, int t, int half, uint32_t bits) {
  a.step[t / 2].reg[2 * (t % 2) + half] = bits;
}

// Columns col, col + 1 (col even) of row `row` of a dense (16 x kCols) tile in shared memory, as
// floats, zero past kCols: one 4-byte (16-bit) or 8-byte (float) load where kCols is even.
template <typename T, int kCols>
__device__ __forceinline__ float2 shared_pair(const T* tile, int row, int col) {
  const T* at = tile + row * kCols + col;
  if constexpr (kCols % 2 == 0) {
    if (col >= kCols) return {0.f, 0.f};
    if constexpr (std::is_same_v<T, float>) {
      return *reinterpret_cast<const float2*>(at);
    } else {
      return unpack2<T>(*reinterpret_cast<const uint32_t*>(at));
    }
  } else {
    return {col < kCols ? static_cast<float>(at[0]) : 0.f,
            col + 1 < kCols ? static_cast<float>(at[1]) : 0.f};
  }
}

// Whether a matrix's column pairs (col even) sit at pair-aligned addresses: its first element
// aligned to two elements and an even row stride. Then each pair is one 4-byte (16-bit) or 8-byte
// (float) access, else two.
template <typename T>
__device__ __forceinline__ bool pairs_aligned(const T* first, int64_t stride) {
  return stride % 2 == 0 && reinterpret_cast<uintptr_t>(first) % (2 * sizeof(T)) == 0;
}

// Columns col, col + 1 (col even) of one row (`row` its first element, `cols` wide) from global
// memory as floats, zero past cols.
template <typename T>
__device__ __forceinline__ float2 load_pair(const T* row, int col, int cols, bool paired) {
  if (col >= cols) return {0.f, 0.f};
  if (paired && col + 1 < cols) {
    if constexpr (std::is_same_v<T, float>) {
      return *reinterpret_cast<const float2*>(row + col);
    } else {
      return unpack2<T>(*reinterpret_cast<const uint32_t*>(row + col));
    }
  }
  return {static_cast<float>(row[col]), col + 1 < cols ? static_cast<float>(row[col + 1]) : 0.f};
}

// The inverse: a pair of 16-bit values already packed, written where it lies within `cols`.
template <typename T>
__device__ __forceinline__ void store_pair_bits(T* row, int col, int cols, bool paired,
                                                uint32_t bits) {
  if (col >= cols) return;
  if (paired && col + 1 < cols) {
    *reinterpret_cast<uint32_t*>(row + col) = bits;
    return;
  }
  const float2 v = unpack2<T>(bits);
  row[col] = static_cast<T>(v.x);
  if (col + 1 < cols) row[col + 1] = static_cast<T>(v.y);
}

template <typename T>
__device__ __forceinline__ void store_pair(T* row, int col, int cols, bool paired, float lo,
                                           float hi) {
  if constexpr (std::is_same_v<T, float>) {
    if (col >= cols) return;
    if (paired && col + 1 < cols) {
      *reinterpret_cast<float2*>(row + col) = make_float2(lo, hi);
      return;
    }
    row[col] = lo;
    if (col + 1 < cols) row[col + 1] = hi;
  } else {
    store_pair_bits(row, col, cols, paired, pack2<T>(lo, hi));
  }
}

// Everything a launch needs; layer l (0-based) maps widths[l] -> widths[l+1].
template <typename T>
struct Params {
  const T* x;
  const T* weight[8];
  const T* bias[8];  // null without bias
  T* y;
  T* saved;  // null when the forward keeps nothing
  int64_t saved_stride;
  int64_t output_column[9];         // a_l's first column in saved (l = 1 .. L-1)
  int64_t preactivation_column[9];  // z_l's (l = 1 .. L, where kept)
  int64_t rows;
  // backward only
  const T* grad_out;
  T* grad_x;
  T* grad_pre[9];         // G_l (l = 1 .. L): layer l's pre-activation gradient, (rows, widths[l])
  float* bias_partial;    // per block, the column sums of every G_l (BiasSums); null without bias
  float* weight_partial;  // per block, its share of every dW_l (WeightGrads); fused kernel only
};

constexpr int kRowsPerWarp = 16;  // one m16 tile: each warp carries 16 rows through the network

// Warps per block (one block per multiprocessor, sharing one copy of the weights). Their
// registers bound how many: the forward holds a layer's operand and the next one's (16-bit: 32
// registers each at width 128, tf32: 64), the backward the saved activations as well. 16 warps
// leave 128 registers a thread, 12 leave 168 (tf32's forward at width 128 spills there), 8
// leave 255.
template <typename T, class Net>
__host__ __device__ constexpr int forward_warps() {
  return sizeof(T) == 2 ? 16 : Net::max_padded() <= 64 ? 12 : 8;
}
template <typename T>
__host__ __device__ constexpr int backward_warps() {
  return sizeof(T) == 2 ? 12 : 8;
}
// With the weight gradients in the kernel (WeightGrads), 12: each warp also keeps its share of the
// dW accumulators, and two G tiles and an x tile in shared memory, where one saved tile a warp
// then fits (FusedPlan; x's gradient leaves through a G tile).
constexpr int kFusedWarps = 12;
template <typename T, bool kWeights>
__host__ __device__ constexpr int backward_kernel_warps() {
  return kWeights ? kFusedWarps : backward_warps<T>();
}

// Shared memory: the weights' tiles (all layers, or the widest one when streaming), the biases
// (float, padded), and each warp's row buffer (16 rows of kBufferCols: x in the forward, the
// output gradient in the backward), which the next tile's rows fill while the warp computes,
// followed by kSavedElements more a warp (tiles of what the forward keeps: SavedTile).
template <typename T, class Net, int kWarps, int kBufferCols, int kSavedElements = 0,
          int kSumColumns = 0>
struct Layout {
  __host__ __device__ static constexpr int tile_elements(int l) {
    return padded(Net::width(l + 1)) * padded(Net::width(l));
  }
  __host__ __device__ static constexpr int64_t weight_offset(int l) {  // in elements, resident
    int64_t offset = 0;
    for (int i = 0; i < l; ++i) offset += tile_elements(i);
    return offset;
  }
  __host__ __device__ static constexpr int64_t all_weights() { return weight_offset(Net::kLayers); }
  __host__ __device__ static constexpr int64_t widest_tile() {
    int64_t m = 0;
    for (int i = 0; i < Net::kLayers; ++i) m = tile_elements(i) > m ? tile_elements(i) : m;
    return m;
  }
  __host__ __device__ static constexpr int64_t weight_bytes(bool resident) {
    return (resident ? all_weights() : widest_tile()) * int64_t(sizeof(T));
  }
  __host__ __device__ static constexpr int64_t bias_bytes() {
    return int64_t(Net::kLayers) * Net::max_padded() * 4;
  }
  __host__ __device__ static constexpr int64_t buffer_elements() {  // per warp, whole 16 bytes
    const int64_t elements = int64_t(kRowsPerWarp) * kBufferCols;
    const int64_t vec = 16 / sizeof(T);
    return (elements + vec - 1) / vec * vec;
  }
  __host__ __device__ static constexpr int64_t warp_elements() {
    return buffer_elements() + kSavedElements;
  }
  // After the warps' rows: kSumColumns floats a warp (the backward's column sums, BiasSums).
  __host__ __device__ static constexpr int64_t sums_offset(bool resident) {  // bytes
    return weight_bytes(resident) + bias_bytes() + kWarps * warp_elements() * int64_t(sizeof(T));
  }
  __host__ __device__ static constexpr int64_t bytes(bool resident) {
    return sums_offset(resident) + int64_t(kWarps) * kSumColumns * 4;
  }
};

// The largest shared memory a block may have on any supported GPU (sm_90's opt-in limit). Tiles
// of what the forward keeps are only planned where a layout stays within it; a device with less
// (checked at launch) runs the kernels without them.
constexpr int64_t kSharedBudget = 227 * 1024;

// The columns of what the forward keeps (opgen/mlp.h's Network, at compile time): a_1 .. a_{L-1},
// then z_1 .. z_{L-1} (GELU, SiLU), then z_L (an output GELU or SiLU).
template <class Net, Activation kHidden, Activation kOut>
struct Saved {
  __host__ __device__ static constexpr int output_column(int layer) {
    int column = 0;
    for (int l = 1; l < layer; ++l) column += Net::width(l);
    return column;
  }
  __host__ __device__ static constexpr int preactivation_column(int layer) {
    int column = output_column(Net::kLayers);
    if (reads_preactivation(kHidden)) {
      for (int l = 1; l < layer; ++l) column += Net::width(l);
    }
    return column;
  }
  __host__ __device__ static constexpr int columns() {
    const int c = preactivation_column(Net::kLayers);
    return reads_preactivation(kOut) ? c + Net::width(Net::kLayers) : c;
  }
};

// A warp's 16 rows of what the forward keeps, in shared memory: rows kPitch = kCols + 8 elements
// apart, so that the pairs one accumulator row group writes or reads (8 rows, 4 pairs each) fall
// in different banks. Only for rows of whole 16-byte chunks (kCols * sizeof(T) % 16 == 0): a tile
// then moves to and from global memory, where its rows are one contiguous block, in 16-byte
// chunks.
template <typename T, int kCols>
struct SavedTile {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  static constexpr bool kUsable = kCols > 0 && kCols % kVec == 0;
  static constexpr int kPitch = kCols + 8;
  static constexpr int kElements = kRowsPerWarp * kPitch;
  static constexpr int kChunks = kCols / kVec;  // a row's

  // Starts copying rows row0 .. row0 + valid - 1 of (rows, kCols) `src` in (cp.async where the
  // matrix is 16-byte aligned); the reader waits (cp_async_wait, __syncwarp) first.
  __device__ __forceinline__ static void fetch(T* tile, const T* src, int64_t row0, int valid,
                                               bool aligned, int lane) {
    const T* first = src + row0 * kCols;
    if (aligned) {
      const uint32_t to = tc::shared_address(tile);
      for (int i = lane; i < valid * kChunks; i += 32) {
        const int r = i / kChunks, c = i - r * kChunks;
        tc::cp_async_16(to + (r * kPitch + c * kVec) * sizeof(T), first + r * kCols + c * kVec,
                        true);
      }
    } else {
      for (int i = lane; i < valid * kCols; i += 32) {
        const int r = i / kCols;
        tile[r * kPitch + (i - r * kCols)] = first[i];
      }
    }
    tc::cp_async_commit();
  }

  // The inverse: the tile's first `valid` rows out to rows row0.. of `dst` (after a __syncwarp).
  __device__ __forceinline__ static void flush(const T* tile, T* dst, int64_t row0, int valid,
                                               bool aligned, int lane) {
    T* first = dst + row0 * kCols;
    if (aligned) {
      for (int i = lane; i < valid * kChunks; i += 32) {
        const int r = i / kChunks, c = i - r * kChunks;
        *reinterpret_cast<int4*>(first + r * kCols + c * kVec) =
            *reinterpret_cast<const int4*>(tile + r * kPitch + c * kVec);
      }
    } else {
      for (int i = lane; i < valid * kCols; i += 32) {
        const int r = i / kCols;
        first[i] = tile[r * kPitch + (i - r * kCols)];
      }
    }
  }

  // Columns kColumn + col, + 1 (col even) of row `row`, within a block of kWidth columns, as
  // floats (zero past kWidth); one 4- or 8-byte access where kColumn is even.
  template <int kColumn, int kWidth>
  __device__ __forceinline__ static float2 read(const T* tile, int row, int col) {
    if (col >= kWidth) return {0.f, 0.f};
    const T* at = tile + row * kPitch + kColumn + col;
    if constexpr (kColumn % 2 == 0 && kWidth % 2 == 0) {
      if constexpr (std::is_same_v<T, float>) {
        return *reinterpret_cast<const float2*>(at);
      } else {
        return unpack2<T>(*reinterpret_cast<const uint32_t*>(at));
      }
    } else {
      return {static_cast<float>(at[0]), col + 1 < kWidth ? static_cast<float>(at[1]) : 0.f};
    }
  }

  template <int kColumn, int kWidth>
  __device__ __forceinline__ static void write_bits(T* tile, int row, int col, uint32_t bits) {
    if constexpr (kColumn % 2 == 0 && kWidth % 2 == 0) {
      if (col < kWidth) *reinterpret_cast<uint32_t*>(tile + row * kPitch + kColumn + col) = bits;
    } else {
      const float2 v = unpack2<T>(bits);
      write<kColumn, kWidth>(tile, row, col, v.x, v.y);
    }
  }

  template <int kColumn, int kWidth>
  __device__ __forceinline__ static void write(T* tile, int row, int col, float lo, float hi) {
    if (col >= kWidth) return;
    T* at = tile + row * kPitch + kColumn + col;
    if constexpr (kColumn % 2 == 0 && kWidth % 2 == 0 && !std::is_same_v<T, float>) {
      *reinterpret_cast<uint32_t*>(at) = pack2<T>(lo, hi);
    } else {
      at[0] = static_cast<T>(lo);
      if (col + 1 < kWidth) at[1] = static_cast<T>(hi);
    }
  }
};

// A warp's 16 rows of one output of the backward (a layer's pre-activation gradient G_l, or x's
// gradient), (rows, kCols) in global memory, where a tile of 16 rows is one contiguous block: the
// MMA epilogue writes its pairs here, and the tile leaves in 16-byte chunks (a pair written
// straight from the accumulators is half a 32-byte sector in 16-bit). Rows of whole chunks are
// kCols + 8 elements apart (the pairs of one accumulator row group fall in different banks);
// other widths are dense (pitch kCols), their chunks straddling rows.
template <typename T, int kCols>
struct OutTile {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  static constexpr bool kPadded = kCols % kVec == 0;
  static constexpr int kPitch = kPadded ? kCols + 8 : kCols;

  // Columns col, col + 1 (col even) of row `row`, where they lie within kCols.
  __device__ __forceinline__ static void write(T* tile, int row, int col, float lo, float hi) {
    if (col >= kCols) return;
    T* at = tile + row * kPitch + col;
    if constexpr (kCols % 2 == 0 && std::is_same_v<T, float>) {
      *reinterpret_cast<float2*>(at) = make_float2(lo, hi);
    } else if constexpr (kCols % 2 == 0) {
      *reinterpret_cast<uint32_t*>(at) = pack2<T>(lo, hi);
    } else {
      at[0] = static_cast<T>(lo);
      if (col + 1 < kCols) at[1] = static_cast<T>(hi);
    }
  }

  // The tile's first `valid` rows out to rows row0.. of `dst` (after a __syncwarp): 16-byte
  // chunks where dst is 16-byte aligned (row0 is a multiple of 16, so the block is too).
  __device__ __forceinline__ static void flush(const T* tile, T* dst, int64_t row0, int valid,
                                               bool aligned, int lane) {
    T* first = dst + row0 * kCols;
    const int count = valid * kCols;
    int done = 0;
    if (aligned) {
      const int chunks = count / kVec;
      for (int i = lane; i < chunks; i += 32) {
        int from = i * kVec;
        if constexpr (kPadded) {
          const int r = i / (kCols / kVec);
          from = r * kPitch + (i - r * (kCols / kVec)) * kVec;
        }
        *reinterpret_cast<int4*>(first + i * kVec) = *reinterpret_cast<const int4*>(tile + from);
      }
      done = chunks * kVec;
    }
    for (int i = done + lane; i < count; i += 32) {
      const int r = i / kCols;
      first[i] = tile[r * kPitch + (i - r * kCols)];
    }
  }
};

// The largest OutTile of a network's backward (x's gradient and every G_l), in elements.
template <typename T, class Net>
__host__ __device__ constexpr int out_tile_elements() {
  int most = 0;
  for (int l = 0; l <= Net::kLayers; ++l) {
    const int w = Net::width(l), vec = 16 / static_cast<int>(sizeof(T));
    const int elements = kRowsPerWarp * (w % vec == 0 ? w + 8 : w);
    most = elements > most ? elements : most;
  }
  return most;
}

// The bias gradients' column sums: each warp of the backward adds its rows' sums of every G_l
// into its own floats in shared memory, layer l (1-based) at offset(l), padded(widths[l]) wide;
// at the end the block adds its warps' in warp order into one partial per block, and
// sum_partials (opgen/reduce.cuh) adds the blocks' in a fixed order. No atomics: the same inputs
// on the same device give the same bits.
template <class Net>
struct BiasSums {
  __host__ __device__ static constexpr int offset(int layer) {
    int column = 0;
    for (int l = 1; l < layer; ++l) column += padded(Net::width(l));
    return column;
  }
  __host__ __device__ static constexpr int columns() { return offset(Net::kLayers + 1); }
};

// A dense tile of 16-bit values in shared memory, rows kPitch elements apart, as tensor_core.cuh's
// fragment loads address it (their Tile::offset): for tiles whose rows are whole 16-byte chunks
// and 8 elements longer than what is read of them (the eight row addresses of an ldmatrix then
// fall in different banks).
template <typename T, int kPitch>
struct PitchedTile {
  using Element = T;
  __host__ __device__ static constexpr int offset(int row, int col) { return row * kPitch + col; }
};

// A width rounded up to whole 16-column MMA tiles.
__host__ __device__ constexpr int round16(int width) {
  return (width + 15) / 16 * 16;
}

// The weight gradients inside the backward kernel (16-bit types): dW_l = G_l^T in_l, with in_0 = x
// and in_l = a_l (what the forward kept), summed over rows. Each warp writes its 16 rows of G_l
// into a shared tile (two, alternating by layer) and, for the first layer, stages its rows of x;
// after a __syncthreads every warp adds the block's rows (K = 16 a warp, in warp order) into its
// own share of the dW tiles: 16 x 16 units (two m16n8k16 accumulators), layer l's unit u to warp
// u % kWarps, on tensor cores reading G_l (ldmatrix.trans: G^T is the A operand) and in_l
// (ldmatrix.trans: the B operand) from the warps' tiles. The float accumulators stay in registers
// through the persistent loop; at the end each block writes one partial (every dW_l, at its own
// shape), which sum_partials (opgen/reduce.cuh) adds up in a fixed order. No atomics:
// deterministic. G_l never goes to global memory.
template <typename T, class Net, Activation kHidden, Activation kOut, int kWarps>
struct WeightGrads {
  using Kept = Saved<Net, kHidden, kOut>;
  using Tiles = SavedTile<T, Kept::columns()>;
  static constexpr int kLayers = Net::kLayers;
  __host__ __device__ static constexpr int g_pitch() {
    int most = 0;
    for (int l = 1; l <= kLayers; ++l)
      most = round16(Net::width(l)) > most ? round16(Net::width(l)) : most;
    return most + 8;
  }
  static constexpr int kGPitch = g_pitch();
  static constexpr int kXPitch = round16(Net::width(0)) + 8;
  static constexpr int kGElements = kRowsPerWarp * kGPitch;
  static constexpr int kXElements = kRowsPerWarp * kXPitch;
  static constexpr int kElements = 2 * kGElements + kXElements;  // a warp's: two G tiles, x
  // x's gradient leaves through the second G tile (an OutTile there): while a warp walks the first
  // layer, the block reads only the first (G_0) and the x tiles.
  static constexpr bool kOutInG = kRowsPerWarp * OutTile<T, Net::width(0)>::kPitch <= kGElements;
  // Layer l (0-based: widths[l] -> widths[l + 1]) has units(l) units; unit u of the layer goes to
  // warp u % kWarps, into its accumulator slot slot_start(l) + u / kWarps (slots(l) a warp).
  __host__ __device__ static constexpr int units(int l) {
    return round16(Net::width(l + 1)) / 16 * (round16(Net::width(l)) / 16);
  }
  __host__ __device__ static constexpr int slots(int l) { return (units(l) + kWarps - 1) / kWarps; }
  __host__ __device__ static constexpr int slot_start(int l) {
    int s = 0;
    for (int i = 0; i < l; ++i) s += slots(i);
    return s;
  }
  static constexpr int kPerWarp = slot_start(kLayers);
  // A block's partial: layer l's out x in floats (dW_l's shape) at partial_offset(l).
  __host__ __device__ static constexpr int64_t partial_offset(int l) {
    int64_t o = 0;
    for (int i = 0; i < l; ++i) o += int64_t(Net::width(i + 1)) * Net::width(i);
    return o;
  }
  __host__ __device__ static constexpr int64_t columns() { return partial_offset(kLayers); }
  // Where the fused weight gradients apply: 16-bit types, what the forward kept in shared tiles
  // (kSavedTiles > 0), each a_l starting on a 16-byte chunk of its tile row with its round16
  // columns inside the row, and at most 8 slots (64 accumulator floats) a thread.
  __host__ __device__ static constexpr bool usable(int saved_tiles) {
    bool fits = sizeof(T) == 2 && saved_tiles > 0 && Tiles::kUsable && kPerWarp <= 8;
    for (int l = 1; l < kLayers; ++l) {
      fits = fits && Kept::output_column(l) % 8 == 0 &&
             Kept::output_column(l) + round16(Net::width(l)) <= Tiles::kPitch;
    }
    return fits;
  }

  // Rows row0 .. row0 + valid - 1 of x (rows, widths[0]) into a warp's x tile, rows past `valid`
  // zero (their G rows are zero too, but a stale value times zero could be a NaN): cp.async in
  // 16-byte chunks where x's rows are whole chunks and x is aligned, plain loads otherwise.
  __device__ __forceinline__ static void fetch_x(T* tile, const T* x, int64_t row0, int valid,
                                                 bool aligned, int lane) {
    constexpr int kCols = Net::width(0);
    constexpr int kVec = 8;
    const T* first = x + row0 * kCols;
    if (kCols % kVec == 0 && aligned) {
      const uint32_t to = tc::shared_address(tile);
      constexpr int kChunks = kCols / kVec;
      for (int i = lane; i < valid * kChunks; i += 32) {
        const int r = i / kChunks, c = i - r * kChunks;
        tc::cp_async_16(to + (r * kXPitch + c * kVec) * sizeof(T), first + r * kCols + c * kVec,
                        true);
      }
    } else {
      for (int i = lane; i < valid * kCols; i += 32) {
        const int r = i / kCols;
        tile[r * kXPitch + (i - r * kCols)] = first[i];
      }
    }
    for (int i = valid * kXPitch + lane; i < kRowsPerWarp * kXPitch; i += 32) {
      tile[i] = static_cast<T>(0.f);
    }
    tc::cp_async_commit();
  }

  // Columns col, col + 1 (col even) of row `row` of G_l into a G tile, where they lie within the
  // layer's round16 columns (zero past its width: the padded weights give zero there).
  template <int kWidth>
  __device__ __forceinline__ static void write_g(T* tile, int row, int col, float lo, float hi) {
    if (col < round16(kWidth)) {
      *reinterpret_cast<uint32_t*>(tile + row * kGPitch + col) = pack2<T>(lo, hi);
    }
  }

  // One warp's 16 rows (G tile `g`, in_l rows `in`) into this warp's units of layer l: per unit
  // an ldmatrix.trans of G^T's 16 x 16 (the A operand) and two m16n8k16 MMAs; where every unit
  // of the warp in this layer has the same columns (kWarps a multiple of the layer's column
  // units), one B load serves them all. No branch but the last slot's, so that a caller's
  // unrolled loop over the source warps lets the loads run ahead of the MMAs.
  template <int l, int kInPitch>
  __device__ __forceinline__ static void add_rows(tc::Accumulator (&acc)[kPerWarp][2], int warp,
                                                  const T* g, const T* in, int lane) {
    using GTile = PitchedTile<T, kGPitch>;
    using InTile = PitchedTile<T, kInPitch>;
    constexpr int kNUnits = round16(Net::width(l)) / 16;
    constexpr int kFull = units(l) / kWarps;  // slots every warp has
    constexpr bool kShareB = kWarps % kNUnits == 0;
    tc::FragmentB shared0, shared1;
    if constexpr (kShareB) {
      tc::load_b16_pair<InTile, true>(shared0, shared1, in, 0, warp % kNUnits * 16, lane);
    }
#pragma unroll
    for (int i = 0; i < slots(l); ++i) {
      const int u = warp + kWarps * i;
      if (i < kFull || u < units(l)) {
        tc::FragmentA a;
        tc::load_a16<GTile, true>(a, g, 0, u / kNUnits * 16, lane);
        tc::FragmentB b0 = shared0, b1 = shared1;
        if constexpr (!kShareB) {
          tc::load_b16_pair<InTile, true>(b0, b1, in, 0, u % kNUnits * 16, lane);
        }
        tc::Mma<T>::run(acc[slot_start(l) + i][0], a, b0);
        tc::Mma<T>::run(acc[slot_start(l) + i][1], a, b1);
      }
    }
  }

  // Layer l's share of this warp: the block's rows (each warp's 16, in warp order; a warp without
  // rows holds zero tiles), unrolled over the warps so that their loads run ahead of the MMAs.
  // `g_of(w)` is warp w's G tile of this layer, `in_of(w)` its in_l rows (x tile, or the saved
  // tile at a_l's column).
  template <int l, int kInPitch, class GOf, class InOf>
  __device__ __forceinline__ static void accumulate(tc::Accumulator (&acc)[kPerWarp][2], int warp,
                                                    GOf&& g_of, InOf&& in_of, int lane) {
    if constexpr (units(l) < kWarps) {
      if (warp >= units(l)) return;  // none of the layer's units is this warp's
    }
#pragma unroll
    for (int w = 0; w < kWarps; ++w) add_rows<l, kInPitch>(acc, warp, g_of(w), in_of(w), lane);
  }

  // The warp's units of layer l out to the block's partial (what lies within dW_l).
  template <int l>
  __device__ __forceinline__ static void write_partial(const tc::Accumulator (&acc)[kPerWarp][2],
                                                       float* partial, int warp, int lane) {
    constexpr int kLd = round16(Net::width(l));
    constexpr int kOutWidth = Net::width(l + 1), kInWidth = Net::width(l);
    float* const at = partial + partial_offset(l);
#pragma unroll
    for (int i = 0; i < slots(l); ++i) {
      const int u = warp + kWarps * i;
      if (u >= units(l)) continue;
      const int m0 = u / (kLd / 16) * 16, n0 = u % (kLd / 16) * 16;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const tc::FragmentCoord c = tc::accumulator_coord(lane, r);
          const int row = m0 + c.row, col = n0 + 8 * h + c.col;
          if (row < kOutWidth && col < kInWidth) {
            at[row * kInWidth + col] = acc[slot_start(l) + i][h].value[r];
          }
        }
      }
    }
  }
};

// What the backward kernel keeps in shared memory, the most that fits: with every weight
// resident, for 16-bit types an OutTile a warp (kStage), then as many saved tiles (kTiles: 2, the
// next tile's rows of what the forward kept arrive while this one's are read; 1, once this one's
// are read; 0, read from global memory directly) as fit.
template <typename T, class Net, Activation kHidden, Activation kOut, int kWarps>
struct BackwardPlan {
  using Tile = SavedTile<T, Saved<Net, kHidden, kOut>::columns()>;
  template <int kTileCount, bool kStaged>
  using Shared = Layout<T, Net, kWarps, Net::width(Net::kLayers),
                        kTileCount * Tile::kElements + (kStaged ? out_tile_elements<T, Net>() : 0),
                        BiasSums<Net>::columns()>;
  static constexpr bool kStage =
      !std::is_same_v<T, float> && Shared<0, true>::bytes(true) <= kSharedBudget;
  static constexpr int tiles() {
    if (!Tile::kUsable || kHidden == Activation::kNone) return 0;  // none: nothing to read
    if (Shared<2, kStage>::bytes(true) <= kSharedBudget) return 2;
    return Shared<1, kStage>::bytes(true) <= kSharedBudget ? 1 : 0;
  }
  static constexpr int kTiles = tiles();
};

// The backward kernel with the weight gradients fused (WeightGrads, kFusedWarps warps), where it
// applies: 16-bit types, everything in shared memory as BackwardPlan's with kStage (x's gradient's
// OutTile in a G tile where it fits there), plus each warp's two G tiles and x tile, and two saved
// tiles (else one).
template <typename T, class Net, Activation kHidden, Activation kOut>
struct FusedPlan {
  using Tile = SavedTile<T, Saved<Net, kHidden, kOut>::columns()>;
  using Grads = WeightGrads<T, Net, kHidden, kOut, kFusedWarps>;
  static constexpr int kOutTileElements = Grads::kOutInG ? 0 : out_tile_elements<T, Net>();
  template <int kTileCount>
  using Shared = Layout<T, Net, kFusedWarps, Net::width(Net::kLayers),
                        kTileCount * Tile::kElements + kOutTileElements + Grads::kElements,
                        BiasSums<Net>::columns()>;
  static constexpr int tiles() {
    if (!Tile::kUsable || kHidden == Activation::kNone) return 0;
    if (Shared<2>::bytes(true) <= kSharedBudget) return 2;
    return Shared<1>::bytes(true) <= kSharedBudget ? 1 : 0;
  }
  static constexpr int kTiles = tiles();
  static constexpr bool kUsable = !std::is_same_v<T, float> && Grads::usable(kTiles);
};

// Whether the forward stages what it keeps in a shared tile (16-bit types: their pairs are half a
// 32-byte sector, which written straight from the accumulators costs twice the write traffic).
template <typename T, class Net, Activation kHidden, Activation kOut, int kWarps>
__host__ __device__ constexpr bool stages_saved() {
  using Tile = SavedTile<T, Saved<Net, kHidden, kOut>::columns()>;
  using L = Layout<T, Net, kWarps, Net::width(0)>;
  return !std::is_same_v<T, float> && Tile::kUsable &&
         L::bytes(true) + int64_t(kWarps) * Tile::kElements * int64_t(sizeof(T)) <= kSharedBudget;
}

// f(std::integral_constant<int, i>) for i = kBegin .. kEnd-1, unrolled at compile time (each
// layer has its own widths, so each is its own code).
template <int kBegin, int kEnd, typename F>
__device__ __forceinline__ void static_for(F&& f) {
  if constexpr (kBegin < kEnd) {
    f(std::integral_constant<int, kBegin>{});
    static_for<kBegin + 1, kEnd>(f);
  }
}

// Layer l's weights (or their transpose, for the backward) into its swizzled tile, zero-padded:
// forward [padded(out)][padded(in)] holding W[n][k]; backward [padded(in)][padded(out)] holding
// W[n][j] at row j, column n. Columns are placed where the fragment loads expect them, float
// values already rounded to tf32 (so the MMAs read them as they are). Each thread has 16 loads in
// flight before it stores: one round trip to memory per 16 elements a thread, not per element.
template <typename T, class Net, int kLayer, bool kTranspose>
__device__ void stage_weights(T* tile, const T* weight) {
  constexpr int kOut = Net::width(kLayer + 1), kIn = Net::width(kLayer);
  constexpr int kRows = kTranspose ? padded(kIn) : padded(kOut);
  constexpr int kCols = kTranspose ? padded(kOut) : padded(kIn);
  constexpr int kTotal = kRows * kCols;
  constexpr int kBatch = 16;
  using Tile = tc::SwizzledTile<T, kRows, kCols>;
  for (int i0 = threadIdx.x; i0 < kTotal; i0 += blockDim.x * kBatch) {
    T v[kBatch];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = i0 + j * blockDim.x;
      const int r = i / kCols, c = i % kCols;
      const int n = kTranspose ? c : r, k = kTranspose ? r : c;
      v[j] = (i < kTotal && n < kOut && k < kIn) ? weight[n * kIn + k] : static_cast<T>(0.f);
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int i = i0 + j * blockDim.x;
      if (i < kTotal) {
        const int r = i / kCols, c = i % kCols;
        if constexpr (std::is_same_v<T, float>) {
          tile[Tile::offset(r, stored_column<T>(c))] = __uint_as_float(tc::to_tf32(v[j]));
        } else {
          tile[Tile::offset(r, stored_column<T>(c))] = v[j];
        }
      }
    }
  }
}

// Starts copying rows row0 .. row0 + valid - 1 of a dense (rows, kCols) matrix into a warp's
// buffer (dense, 16 x kCols): cp.async in 16-byte chunks where the matrix is 16-byte aligned (a
// tile of 16 rows then always starts on a chunk; only the last tile's partial chunk is copied by
// plain loads), plain loads otherwise. The reader waits (cp_async_wait<0>, __syncwarp) first.
template <typename T, int kCols>
__device__ __forceinline__ void fetch_rows(T* buffer, const T* src, int64_t row0, int valid,
                                           bool aligned, int lane) {
  const T* first = src + row0 * kCols;
  const int count = valid * kCols;
  constexpr int kVec = 16 / sizeof(T);
  int done = 0;
  if (aligned) {
    const int chunks = count / kVec;
    const uint32_t to = tc::shared_address(buffer);
    for (int i = lane; i < chunks; i += 32) tc::cp_async_16(to + 16 * i, first + i * kVec, true);
    done = chunks * kVec;
  }
  for (int i = done + lane; i < count; i += 32) buffer[i] = first[i];
  tc::cp_async_commit();
}

// One layer for one warp's 16 rows: out (16 x kN) = a (16 x kK) times the staged tile's transpose
// ([kN][kK], n-major). The accumulators of 4 output tiles (32 columns) at a time run through every
// k-step, then epilogue(t, accumulator) takes each tile t of the group in turn: the output becomes
// the next operand group by group, with few accumulators live. B fragments come two tiles per
// ldmatrix.
template <typename T, int kK, int kN, int kWidth, class Epilogue>
__device__ __forceinline__ void warp_layer(const Operand<T, kWidth>& a, const T* tile, int lane,
                                           Epilogue&& epilogue) {
  using Tile = tc::SwizzledTile<T, kN, kK>;
  constexpr int kStep = tc::Mma<T>::kK;
  constexpr int kGroup = kN / 8 < 4 ? kN / 8 : 4;
#pragma unroll
  for (int t0 = 0; t0 < kN / 8; t0 += kGroup) {
    tc::Accumulator acc[kGroup];
#pragma unroll
    for (int kt = 0; kt < kK / kStep; ++kt) {
#pragma unroll
      for (int j = 0; j < kGroup; j += 2) {
        tc::FragmentB b0, b1;
        if constexpr (std::is_same_v<T, float>) {
          tc::load_b_tf32_pair_rounded<Tile>(b0, b1, tile, (t0 + j) * 8, kt * kStep, lane);
        } else {
          tc::load_b16_pair<Tile, false>(b0, b1, tile, (t0 + j) * 8, kt * kStep, lane);
        }
        tc::Mma<T>::run(acc[j], a.step[kt], b0);
        tc::Mma<T>::run(acc[j + 1], a.step[kt], b1);
      }
    }
#pragma unroll
    for (int j = 0; j < kGroup; ++j) epilogue(t0 + j, acc[j]);
  }
}

// The rows `stride` after row0 start arriving in a warp's emptied x buffer (fetch_rows), if any.
template <typename T, int kInWidth, class RowsFrom>
__device__ __forceinline__ void fetch_next_input_rows(T* buffer, const Params<T>& p, int64_t row0,
                                                      int64_t stride, bool x_aligned, int lane,
                                                      const RowsFrom& rows_from) {
  if (row0 + stride < p.rows) {
    fetch_rows<T, kInWidth>(buffer, p.x, row0 + stride, rows_from(row0 + stride), x_aligned, lane);
  }
}

// A warp's rows of x (row0 and the `valid` after it, which fetch_rows brought into its buffer) as
// its first layer's operand, zeros past them; then (kFetchNext) the rows `stride` further on start
// arriving in the emptied buffer. The input side of both forward kernels (this file's and
// mlp_hopper.cuh's, which fetches the next rows itself once its first MMAs are issued).
template <typename T, int kInWidth, bool kFetchNext = true, int kWidth, class RowsFrom>
__device__ __forceinline__ void take_input_rows(Operand<T, kWidth>& h, T* buffer,
                                                const Params<T>& p, int64_t row0, int valid,
                                                int64_t stride, bool x_aligned, int lane,
                                                const RowsFrom& rows_from) {
  const int group = lane / 4, quad = lane % 4;
  tc::cp_async_wait<0>();
  __syncwarp();
#pragma unroll
  for (int t = 0; t < padded(kInWidth) / 8; ++t) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = group + 8 * half;
      const float2 v =
          row < valid ? shared_pair<T, kInWidth>(buffer, row, 8 * t + 2 * quad) : float2{0.f, 0.f};
      put(h, t, half, v.x, v.y);
    }
  }
  __syncwarp();  // every lane has read the buffer: the next tile may fill it
  if constexpr (kFetchNext) {
    fetch_next_input_rows<T, kInWidth>(buffer, p, row0, stride, x_aligned, lane, rows_from);
  }
}

// Where one layer's outputs go: y for the last layer, else (when the forward keeps them) a_{l+1}
// and, where the activation's derivative reads it, z_{l+1}, in `saved` or its SavedTile. put_pair
// is the one epilogue of both forward kernels (this file's and mlp_hopper.cuh's): a lane's pair of
// outputs to those places and into the next layer's operand.
template <typename T, class Net, Activation kHidden, Activation kOut, int kLayer, bool kStage>
struct LayerOutputs {
  using Kept = Saved<Net, kHidden, kOut>;
  using Stage = SavedTile<T, Kept::columns()>;
  static constexpr bool k16 = !std::is_same_v<T, float>;
  static constexpr bool kLast = kLayer + 1 == Net::kLayers;
  static constexpr int kWidth = Net::width(kLayer + 1);
  static constexpr Activation kAct = kLast ? kOut : kHidden;
  static constexpr bool kKeepZ = reads_preactivation(kAct);

  bool keep, store_a, a_paired, z_paired;
  T* a_first;
  T* z_first;
  int64_t a_stride, z_stride;

  __device__ __forceinline__ explicit LayerOutputs(const Params<T>& p)
      : keep(p.saved != nullptr),
        store_a(kLast || keep),
        a_first(kLast ? p.y : p.saved + p.output_column[kLayer + 1]),
        z_first(keep ? p.saved + p.preactivation_column[kLayer + 1] : nullptr),
        a_stride(kLast ? int64_t(kWidth) : p.saved_stride),
        z_stride(p.saved_stride) {
    a_paired = store_a && pairs_aligned(a_first, a_stride);
    z_paired = keep && pairs_aligned(z_first, z_stride);
  }

  // Columns col, col + 1 of row `row` of the warp's tile (its rows start at row0; `in`: the row is
  // one of the input's), z0 and z1 their values with the bias added; t and half place them in the
  // next layer's operand.
  template <int kNextWidth>
  __device__ __forceinline__ void put_pair(Operand<T, kNextWidth>& next, T* stage, int64_t row0,
                                           int row, int col, int t, int half, bool in, float z0,
                                           float z1) const {
    if constexpr (k16 && (kAct == Activation::kRelu || kAct == Activation::kNone)) {
      // Rounded to T as eager's GEMM output, then clamped: both on the packed pair.
      const uint32_t zb = pack2<T>(z0, z1);
      const uint32_t ab = kAct == Activation::kRelu ? relu2<T>(zb) : zb;
      if constexpr (!kLast) put_bits(next, t, half, ab);
      if constexpr (kStage && !kLast) {
        if (keep)
          Stage::template write_bits<Kept::output_column(kLayer + 1), kWidth>(stage, row, col, ab);
      } else {
        if (store_a && in) {
          store_pair_bits(a_first + (row0 + row) * a_stride, col, kWidth, a_paired, ab);
        }
      }
    } else {
      const float zr0 = k16 ? round_to<T>(z0) : z0, zr1 = k16 ? round_to<T>(z1) : z1;
      const float a0 = activate<kAct>(zr0), a1 = activate<kAct>(zr1);
      if constexpr (!kLast)
        put<T, kNextWidth, ActivationMath<kAct>::kNeverNan>(next, t, half, a0, a1);
      if constexpr (kStage && !kLast) {
        if (keep)
          Stage::template write<Kept::output_column(kLayer + 1), kWidth>(stage, row, col, a0, a1);
      } else {
        if (store_a && in) {
          store_pair(a_first + (row0 + row) * a_stride, col, kWidth, a_paired, a0, a1);
        }
      }
      if constexpr (kKeepZ && kStage) {
        if (keep) {
          Stage::template write<Kept::preactivation_column(kLayer + 1), kWidth>(stage, row, col,
                                                                                zr0, zr1);
        }
      } else if constexpr (kKeepZ) {
        if (keep && in) {
          store_pair(z_first + (row0 + row) * z_stride, col, kWidth, z_paired, zr0, zr1);
        }
      }
    }
  }
};

// The forward: x (rows, widths[0]) -> y (rows, widths[L]), keeping `saved` when it is set; with
// kStage, what it keeps goes through a shared tile a warp (SavedTile), out in 16-byte chunks.
template <typename T, class Net, Activation kHidden, Activation kOut, bool kBias, bool kResident,
          bool kStage>
__global__ void __launch_bounds__(forward_warps<T, Net>() * 32, 1)
    forward_kernel(const Params<T> p) {
  constexpr int kWarps = forward_warps<T, Net>();
  constexpr int kInWidth = Net::width(0);
  constexpr int kMaxPadded = Net::max_padded();
  using Kept = Saved<Net, kHidden, kOut>;
  using Stage = SavedTile<T, Kept::columns()>;
  using L = Layout<T, Net, kWarps, kInWidth, kStage ? Stage::kElements : 0>;
  extern __shared__ __align__(16) unsigned char shared[];
  T* weights = reinterpret_cast<T*>(shared);
  float* biases = reinterpret_cast<float*>(shared + L::weight_bytes(kResident));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  T* buffer = reinterpret_cast<T*>(shared + L::weight_bytes(kResident) + L::bias_bytes()) +
              warp * L::warp_elements();
  T* stage = buffer + L::buffer_elements();  // kStage only
  const bool x_aligned = reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
  const bool saved_aligned = reinterpret_cast<uintptr_t>(p.saved) % 16 == 0;
  constexpr int64_t kBlockRows = int64_t(kWarps) * kRowsPerWarp;
  const int64_t stride = int64_t(gridDim.x) * kBlockRows;
  const auto rows_from = [&](int64_t row0) {
    return row0 < p.rows ? static_cast<int>(min(int64_t(kRowsPerWarp), p.rows - row0)) : 0;
  };

  // The first tile's rows are on their way while the block stages the weights.
  const int64_t first_row0 = int64_t(blockIdx.x) * kBlockRows + int64_t(warp) * kRowsPerWarp;
  if (first_row0 < p.rows) {
    fetch_rows<T, kInWidth>(buffer, p.x, first_row0, rows_from(first_row0), x_aligned, lane);
  }
  for (int i = threadIdx.x; i < Net::kLayers * kMaxPadded; i += blockDim.x) {
    const int l = i / kMaxPadded, n = i - l * kMaxPadded;
    biases[i] = (kBias && n < Net::width(l + 1)) ? static_cast<float>(p.bias[l][n]) : 0.f;
  }
  if constexpr (kResident) {
    static_for<0, Net::kLayers>([&](auto layer) {
      constexpr int l = decltype(layer)::value;
      stage_weights<T, Net, l, false>(weights + L::weight_offset(l), p.weight[l]);
    });
  }
  __syncthreads();

  for (int64_t block_row0 = int64_t(blockIdx.x) * kBlockRows; block_row0 < p.rows;
       block_row0 += stride) {
    const int64_t row0 = block_row0 + int64_t(warp) * kRowsPerWarp;
    const int valid = rows_from(row0);
    Operand<T, kMaxPadded> h;
    if (valid > 0) {
      take_input_rows<T, kInWidth>(h, buffer, p, row0, valid, stride, x_aligned, lane, rows_from);
    }
    static_for<0, Net::kLayers>([&](auto layer) {
      constexpr int l = decltype(layer)::value;
      constexpr int kK = padded(Net::width(l)), kN = padded(Net::width(l + 1));
      constexpr bool kLast = l + 1 == Net::kLayers;
      if constexpr (!kResident) {
        __syncthreads();  // every warp is done with the previous layer's tile
        stage_weights<T, Net, l, false>(weights, p.weight[l]);
        __syncthreads();
      }
      if (valid == 0) return;
      const T* tile = weights + (kResident ? L::weight_offset(l) : 0);
      const float* bias = biases + l * kMaxPadded;
      const LayerOutputs<T, Net, kHidden, kOut, l, kStage> out(p);
      Operand<T, kMaxPadded> next;
      warp_layer<T, kK, kN>(h, tile, lane, [&](int t, const tc::Accumulator& acc) {
        const int col = 8 * t + 2 * quad;
        const float2 b = *reinterpret_cast<const float2*>(bias + col);
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int row = group + 8 * half;
          out.put_pair(next, stage, row0, row, col, t, half, row < valid, acc.value[2 * half] + b.x,
                       acc.value[2 * half + 1] + b.y);
        }
      });
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
}

// Whether the backward kernel (float32 as TF32, not kWeights) adds its rows into the last layer's
// weight gradient itself: with no output activation, G_L is the output gradient, which sits in
// each warp's row buffer, and a_{L-1} in its saved tile; an output of at most 16 (one m16 tile,
// G_L^T's rows) keeps the warp's share in registers (4 floats a thread an n8 tile). Each warp adds
// its own rows (two m16n8k8 k steps of 8 rows, masked past the matrix) and, at the end, the block
// adds its warps' in warp order into one partial per block (p.weight_partial), summed by
// sum_partials: G_L is not written and dW_L needs no pass of its own.
template <typename T, class Net, Activation kOut, int kSavedTiles, bool kWeights>
__host__ __device__ constexpr bool last_weights_in_kernel() {
  return std::is_same_v<T, float> && !kWeights && kOut == Activation::kNone && kSavedTiles > 0 &&
         Net::width(Net::kLayers) <= 16;
}

// The input gradient, each layer's pre-activation gradient G_l (for the weight GEMMs) and, where
// p.bias_partial is set, the block's column sums of every G_l (the bias gradients: BiasSums).
// With kSavedTiles, each warp's rows of what the forward kept arrive in shared tiles, copied
// ahead with cp.async; without, the derivatives read them from global memory. With kStage (16-bit
// types), G_l and x's gradient leave through an OutTile a warp in 16-byte chunks; without, as
// pairs straight from the accumulators (float: 8-byte pairs, whole sectors a row group). With
// kWeights (FusedPlan, kFusedWarps warps), G_l goes to shared tiles instead, from which the block
// adds its rows into its partial weight gradients (WeightGrads, p.weight_partial): a
// __syncthreads before each layer's, and one at the end of each pass over the block's rows.
template <typename T, class Net, Activation kHidden, Activation kOut, bool kResident,
          int kSavedTiles, bool kStage, bool kWeights = false>
__global__ void __launch_bounds__(backward_kernel_warps<T, kWeights>() * 32, 1)
    backward_kernel(const Params<T> p) {
  constexpr int kWarps = backward_kernel_warps<T, kWeights>();
  constexpr int kLayers = Net::kLayers;
  constexpr int kOutWidth = Net::width(kLayers);
  constexpr int kMaxPadded = Net::max_padded();
  constexpr bool k16 = !std::is_same_v<T, float>;
  using Kept = Saved<Net, kHidden, kOut>;
  using Tiles = SavedTile<T, Kept::columns()>;
  using Sums = BiasSums<Net>;
  using Grads = WeightGrads<T, Net, kHidden, kOut, kWarps>;  // kWeights only
  static_assert(!kWeights || (k16 && kResident && kStage && kSavedTiles > 0),
                "the fused weight gradients need 16-bit types, resident weights, staged tiles");
  constexpr bool kOutInG = kWeights && Grads::kOutInG;  // x's gradient's OutTile: G tile 1
  constexpr int kOutTileElements = kStage && !kOutInG ? out_tile_elements<T, Net>() : 0;
  using L =
      Layout<T, Net, kWarps, kOutWidth,
             kSavedTiles * Tiles::kElements + kOutTileElements + (kWeights ? Grads::kElements : 0),
             Sums::columns()>;
  extern __shared__ __align__(16) unsigned char shared[];
  T* weights = reinterpret_cast<T*>(shared);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int group = lane / 4, quad = lane % 4;
  // Warp w's rows: its buffer, then its saved tiles, its OutTile, and (kWeights) its two G tiles
  // and its x tile.
  const auto warp_rows = [&](int w) {
    return reinterpret_cast<T*>(shared + L::weight_bytes(kResident) + L::bias_bytes()) +
           w * L::warp_elements();
  };
  constexpr int64_t kSavedAt = L::buffer_elements();
  constexpr int64_t kGAt = kSavedAt + kSavedTiles * Tiles::kElements + kOutTileElements;
  constexpr int64_t kXAt = kGAt + 2 * Grads::kGElements;
  T* buffer = warp_rows(warp);
  T* const saved_tiles = buffer + kSavedAt;  // kSavedTiles of them
  T* const g_tiles = buffer + kGAt;          // kWeights only
  T* const out_tile =                        // kStage only
      kOutInG ? g_tiles + Grads::kGElements : saved_tiles + kSavedTiles * Tiles::kElements;
  tc::Accumulator dw[kWeights ? Grads::kPerWarp : 1][2];  // kWeights only
  constexpr bool kLastW = last_weights_in_kernel<T, Net, kOut, kSavedTiles, kWeights>();
  constexpr int kLastIn = Net::width(kLayers - 1), kLastNT = (kLastIn + 7) / 8;
  tc::Accumulator last_dw[kLastW ? kLastNT : 1];  // kLastW only: this warp's rows of dW_L
  const bool x_aligned = reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
  float* const all_sums = reinterpret_cast<float*>(shared + L::sums_offset(kResident));
  float* const sums = all_sums + warp * Sums::columns();
  const bool bias_sums = p.bias_partial != nullptr;
  const bool g_aligned = reinterpret_cast<uintptr_t>(p.grad_out) % 16 == 0;
  const bool saved_aligned = reinterpret_cast<uintptr_t>(p.saved) % 16 == 0;
  constexpr int64_t kBlockRows = int64_t(kWarps) * kRowsPerWarp;
  const int64_t stride = int64_t(gridDim.x) * kBlockRows;
  const auto rows_from = [&](int64_t row0) {
    return row0 < p.rows ? static_cast<int>(min(int64_t(kRowsPerWarp), p.rows - row0)) : 0;
  };
  // Adds one output tile's column sums over the warp's 16 rows, in a fixed order, into the warp's
  // sums: s0, s1 are this thread's two rows' of columns `column`, `column` + 1. The first step
  // splits the pair (an even group keeps column, an odd one column + 1, each sending the other),
  // so three shuffles sum both columns over the 8 groups; groups 0 and 1 hold the totals.
  const auto add_sums = [&](int column, float s0, float s1) {
    const bool odd = group & 1;
    float v = (odd ? s1 : s0) + __shfl_xor_sync(0xffffffffu, odd ? s0 : s1, 4);
    v += __shfl_xor_sync(0xffffffffu, v, 8);
    v += __shfl_xor_sync(0xffffffffu, v, 16);
    if (group < 2) sums[column + group] += v;
  };

  const int64_t first_row0 = int64_t(blockIdx.x) * kBlockRows + int64_t(warp) * kRowsPerWarp;
  if (first_row0 < p.rows) {
    fetch_rows<T, kOutWidth>(buffer, p.grad_out, first_row0, rows_from(first_row0), g_aligned,
                             lane);
    if constexpr (kSavedTiles > 0) {
      Tiles::fetch(saved_tiles, p.saved, first_row0, rows_from(first_row0), saved_aligned, lane);
    }
  }
  for (int i = lane; i < Sums::columns(); i += 32) sums[i] = 0.f;
  if constexpr (kResident) {
    static_for<0, kLayers>([&](auto layer) {
      constexpr int l = decltype(layer)::value;
      stage_weights<T, Net, l, true>(weights + L::weight_offset(l), p.weight[l]);
    });
  }
  __syncthreads();

  // The output activation's derivative reads z_L (GELU, SiLU) or y (ReLU).
  const T* const out_first =
      reads_preactivation(kOut) ? p.saved + p.preactivation_column[kLayers] : p.y;
  const int64_t out_stride = reads_preactivation(kOut) ? p.saved_stride : int64_t(kOutWidth);
  const bool out_paired = kOut != Activation::kNone && pairs_aligned(out_first, out_stride);

  int parity = 0;  // with two saved tiles: the one holding this tile's rows
  for (int64_t block_row0 = int64_t(blockIdx.x) * kBlockRows; block_row0 < p.rows;
       block_row0 += stride, parity ^= 1) {
    const int64_t row0 = block_row0 + int64_t(warp) * kRowsPerWarp;
    const int valid = rows_from(row0);
    T* const kept = saved_tiles + (kSavedTiles == 2 ? parity * Tiles::kElements : 0);
    Operand<T, kMaxPadded> g;
    if (valid > 0) {
      tc::cp_async_wait<0>();
      __syncwarp();
      if constexpr (kWeights) {  // rows past the matrix zero: the block's dW MMAs read them
        for (int i = valid * Tiles::kPitch + lane; i < Tiles::kElements; i += 32) {
          kept[i] = static_cast<T>(0.f);
        }
      }
      T* const last_pre = p.grad_pre[kLayers];
      const bool paired = pairs_aligned(last_pre, int64_t(kOutWidth));
#pragma unroll
      for (int t = 0; t < padded(kOutWidth) / 8; ++t) {
        const int col = 8 * t + 2 * quad;
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int row = group + 8 * half;
          float2 v = row < valid ? shared_pair<T, kOutWidth>(buffer, row, col) : float2{0.f, 0.f};
          if constexpr (kOut != Activation::kNone) {
            const float2 s = row < valid ? load_pair(out_first + (row0 + row) * out_stride, col,
                                                     kOutWidth, out_paired)
                                         : float2{0.f, 0.f};
            v.x *= derivative<kOut>(s.x);
            v.y *= derivative<kOut>(s.y);
            if constexpr (k16) v = {round_to<T>(v.x), round_to<T>(v.y)};
          }
          put(g, t, half, v.x, v.y);
          s0 += v.x;
          s1 += v.y;
          if constexpr (kWeights) {
            Grads::template write_g<kOutWidth>(g_tiles + (kLayers - 1) % 2 * Grads::kGElements, row,
                                               col, v.x, v.y);
          } else if constexpr (kStage) {
            OutTile<T, kOutWidth>::write(out_tile, row, col, v.x, v.y);
          } else if (!kLastW && row < valid) {
            store_pair(last_pre + (row0 + row) * kOutWidth, col, kOutWidth, paired, v.x, v.y);
          }
        }
        if (bias_sums) add_sums(Sums::offset(kLayers) + col, s0, s1);
      }
      __syncwarp();
      if constexpr (kStage && !kWeights) {
        OutTile<T, kOutWidth>::flush(out_tile, last_pre, row0, valid,
                                     reinterpret_cast<uintptr_t>(last_pre) % 16 == 0, lane);
      }
      if constexpr (kLastW) {
        // dW_L += G_L^T a_{L-1} over this warp's rows: G_L (the output gradient, dense in the
        // buffer) as [k][m], a_{L-1} in the saved tile as [k][n]; rows past the matrix and G's
        // columns past the output width read as zeros (the buffer's next row is not G's).
        constexpr int kColumn = Kept::output_column(kLayers - 1);
#pragma unroll
        for (int k0 = 0; k0 < kRowsPerWarp; k0 += 8) {
          tc::FragmentA a;
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const tc::FragmentCoord at = tc::a_tf32_coord(lane, r);  // (m, k)
            const int k = k0 + at.col;
            a.reg[r] = at.row < kOutWidth && k < valid
                           ? tc::to_tf32(static_cast<float>(buffer[k * kOutWidth + at.row]))
                           : 0u;
          }
#pragma unroll
          for (int j = 0; j < kLastNT; ++j) {
            tc::FragmentB b;
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const tc::FragmentCoord at = tc::b_tf32_coord(lane, r);  // (k, n)
              const int k = k0 + at.row;
              b.reg[r] = k < valid ? tc::to_tf32(static_cast<float>(
                                         kept[k * Tiles::kPitch + kColumn + 8 * j + at.col]))
                                   : 0u;
            }
            tc::mma_m16n8k8_tf32(last_dw[j], a, b);
          }
        }
        __syncwarp();  // the buffer is read: the next rows may come in
      }
      if (row0 + stride < p.rows) {
        fetch_rows<T, kOutWidth>(buffer, p.grad_out, row0 + stride, rows_from(row0 + stride),
                                 g_aligned, lane);
        if constexpr (kSavedTiles == 2) {  // into the other tile, read by the previous tile
          Tiles::fetch(saved_tiles + (1 - parity) * Tiles::kElements, p.saved, row0 + stride,
                       rows_from(row0 + stride), saved_aligned, lane);
        }
      }
      // This tile's rows of x, for the first layer's dW, read at the end of the layer walk.
      if constexpr (kWeights) Grads::fetch_x(buffer + kXAt, p.x, row0, valid, x_aligned, lane);
      if constexpr (kStage) __syncwarp();  // the tile is read: the next layer may write it
    } else if constexpr (kWeights) {
      // No rows (the last pass): the block's dW MMAs read every warp's tiles, this one's as zeros.
      T* const zero[] = {g_tiles, buffer + kXAt, kept};
      const int count[] = {2 * Grads::kGElements, Grads::kXElements, Tiles::kElements};
      for (int z = 0; z < 3; ++z) {
        for (int i = lane; i < count[z]; i += 32) zero[z][i] = static_cast<T>(0.f);
      }
    }
    static_for<0, kLayers>([&](auto step) {
      constexpr int l = kLayers - 1 - decltype(step)::value;  // from the last layer to the first
      constexpr int kIn = padded(Net::width(l)), kOutN = padded(Net::width(l + 1));
      constexpr int kInWidth = Net::width(l);
      using Out = OutTile<T, kInWidth>;
      if constexpr (kWeights) {
        // Warp w's G_l tile and its in_l rows (x tile, or a_l in its saved tile).
        constexpr int kInPitch = l == 0 ? Grads::kXPitch : Tiles::kPitch;
        const int64_t in_at = l == 0
                                  ? kXAt
                                  : kSavedAt + (kSavedTiles == 2 ? parity * Tiles::kElements : 0) +
                                        Kept::output_column(l);
        const auto g_of = [&](int w) -> const T* {
          return warp_rows(w) + kGAt + l % 2 * Grads::kGElements;
        };
        const auto in_of = [&](int w) -> const T* {
          return warp_rows(w) + in_at;
        };
        // G_l is in every warp's tile (l % 2): the block adds its rows into dW_l, every warp its
        // own units, before the warps go on (and overwrite the other G tile).
        if constexpr (l == 0) tc::cp_async_wait<0>();  // this thread's copies of x
        __syncthreads();
        Grads::template accumulate<l, kInPitch>(dw, warp, g_of, in_of, lane);
      }
      if constexpr (!kResident) {
        __syncthreads();
        stage_weights<T, Net, l, true>(weights, p.weight[l]);
        __syncthreads();
      }
      if (valid == 0) return;
      const T* tile = weights + (kResident ? L::weight_offset(l) : 0);
      if constexpr (l > 0) {
        // What the hidden activation's derivative reads (a_l, or z_l for GELU and SiLU), loaded
        // before the layer's MMAs so that its latency hides behind them.
        constexpr bool kDerivative = kHidden != Activation::kNone;
        constexpr int kColumn =
            reads_preactivation(kHidden) ? Kept::preactivation_column(l) : Kept::output_column(l);
        [[maybe_unused]] float2 s[kDerivative && kSavedTiles == 0 ? kIn / 8 : 1][2];
        if constexpr (kDerivative && kSavedTiles == 0) {
          const T* s_first = p.saved + (reads_preactivation(kHidden) ? p.preactivation_column[l]
                                                                     : p.output_column[l]);
          const bool s_paired = pairs_aligned(s_first, p.saved_stride);
#pragma unroll
          for (int t = 0; t < kIn / 8; ++t) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const int row = group + 8 * half;
              s[t][half] = row < valid ? load_pair(s_first + (row0 + row) * p.saved_stride,
                                                   8 * t + 2 * quad, kInWidth, s_paired)
                                       : float2{0.f, 0.f};
            }
          }
        }
        T* const pre_first = p.grad_pre[l];
        const bool paired = pairs_aligned(pre_first, int64_t(kInWidth));
        Operand<T, kMaxPadded> next;
        warp_layer<T, kOutN, kIn>(g, tile, lane, [&](int t, const tc::Accumulator& acc) {
          const int col = 8 * t + 2 * quad;
          float s0 = 0.f, s1 = 0.f;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int row = group + 8 * half;
            float v0 = acc.value[2 * half], v1 = acc.value[2 * half + 1];
            if constexpr (kDerivative) {
              if constexpr (k16) v0 = round_to<T>(v0), v1 = round_to<T>(v1);  // eager's GEMM
              float2 sv;
              if constexpr (kSavedTiles > 0) {
                sv = row < valid ? Tiles::template read<kColumn, kInWidth>(kept, row, col)
                                 : float2{0.f, 0.f};
              } else {
                sv = s[t][half];
              }
              v0 *= derivative<kHidden>(sv.x);
              v1 *= derivative<kHidden>(sv.y);
            }
            if constexpr (k16) v0 = round_to<T>(v0), v1 = round_to<T>(v1);
            put(next, t, half, v0, v1);
            if (row < valid) s0 += v0, s1 += v1;
            if constexpr (kWeights) {
              Grads::template write_g<kInWidth>(g_tiles + (l - 1) % 2 * Grads::kGElements, row, col,
                                                v0, v1);
            } else if constexpr (kStage) {
              Out::write(out_tile, row, col, v0, v1);
            } else if (row < valid) {
              store_pair(pre_first + (row0 + row) * kInWidth, col, kInWidth, paired, v0, v1);
            }
          }
          if (bias_sums) add_sums(Sums::offset(l) + col, s0, s1);
        });
        if constexpr (kStage && !kWeights) {
          __syncwarp();
          Out::flush(out_tile, pre_first, row0, valid,
                     reinterpret_cast<uintptr_t>(pre_first) % 16 == 0, lane);
          __syncwarp();
        }
        g = next;
      } else {
        if constexpr (kSavedTiles == 1) {  // this tile's saved rows are read: the next tile's
          if (row0 + stride < p.rows) {
            __syncwarp();
            Tiles::fetch(saved_tiles, p.saved, row0 + stride, rows_from(row0 + stride),
                         saved_aligned, lane);
          }
        }
        const bool paired = pairs_aligned(p.grad_x, int64_t(kInWidth));
        warp_layer<T, kOutN, kIn>(g, tile, lane, [&](int t, const tc::Accumulator& acc) {
          const int col = 8 * t + 2 * quad;
#pragma unroll
          for (int half = 0; half < 2; ++half) {
            const int row = group + 8 * half;
            if constexpr (kStage) {
              Out::write(out_tile, row, col, acc.value[2 * half], acc.value[2 * half + 1]);
            } else if (row < valid) {
              store_pair(p.grad_x + (row0 + row) * kInWidth, col, kInWidth, paired,
                         acc.value[2 * half], acc.value[2 * half + 1]);
            }
          }
        });
        if constexpr (kStage) {
          __syncwarp();
          Out::flush(out_tile, p.grad_x, row0, valid,
                     reinterpret_cast<uintptr_t>(p.grad_x) % 16 == 0, lane);
          __syncwarp();
        }
      }
    });
    if constexpr (kWeights) __syncthreads();  // every warp is done with the G and x tiles
  }
  if constexpr (kWeights) {
    float* const partial = p.weight_partial + int64_t(blockIdx.x) * Grads::columns();
    static_for<0, kLayers>([&](auto layer) {
      Grads::template write_partial<decltype(layer)::value>(dw, partial, warp, lane);
    });
  }

  if constexpr (kLastW) {
    // Each warp's share of dW_L into its own saved tile (16 x 8 kLastNT floats: within the tile,
    // which holds a_{L-1}'s columns and more), then the block's partial, its warps' added in
    // warp order.
    constexpr int kLd = 8 * kLastNT;
    static_assert(kRowsPerWarp * kLd <= Tiles::kElements, "a warp's dW_L fits in its saved tile");
    tc::cp_async_wait<0>();
    __syncthreads();
    float* const mine = reinterpret_cast<float*>(saved_tiles);
#pragma unroll
    for (int j = 0; j < kLastNT; ++j) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const tc::FragmentCoord c = tc::accumulator_coord(lane, r);
        mine[c.row * kLd + 8 * j + c.col] = last_dw[j].value[r];
      }
    }
    __syncthreads();
    float* const partial = p.weight_partial + int64_t(blockIdx.x) * kOutWidth * kLastIn;
    for (int i = threadIdx.x; i < kOutWidth * kLastIn; i += blockDim.x) {
      const int at = i / kLastIn * kLd + i % kLastIn;
      float total = 0.f;
      for (int w = 0; w < kWarps; ++w) {
        total += reinterpret_cast<const float*>(warp_rows(w) + kSavedAt)[at];
      }
      partial[i] = total;
    }
  }

  // The block's partial column sums: its warps' added in warp order.
  if (bias_sums) {
    __syncthreads();
    for (int i = threadIdx.x; i < Sums::columns(); i += blockDim.x) {
      float total = 0.f;
      for (int w = 0; w < kWarps; ++w) total += all_sums[w * Sums::columns() + i];
      p.bias_partial[int64_t(blockIdx.x) * Sums::columns() + i] = total;
    }
  }
}

// What a launch needs to know of a kernel on a device, looked up once per (kernel, device): the
// driver queries cost microseconds each, as much as a small batch's whole network.
struct KernelFacts {
  int sms = 0;
  int blocks_per_sm = 0;
  int shared_limit = 0;  // the opt-in shared memory of one block, bytes
};

template <typename Kernel>
inline KernelFacts kernel_facts(Kernel kernel, int threads, int64_t shared_bytes) {
  return once_per_kernel_and_device(kernel, [&](int /*device*/) {
    KernelFacts facts;
    facts.sms = multiprocessor_count();
    facts.shared_limit = device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>();
    if (shared_bytes <= facts.shared_limit) {
      C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(shared_bytes)));
      C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &facts.blocks_per_sm, kernel, threads, static_cast<size_t>(shared_bytes)));
    }
    return facts;
  });
}

// The persistent grid of `kernel` (kWarps warps a block) over `rows`: as many blocks as fit on
// the device at once (each stages the weights once), and no more than there are rows for.
template <int kWarps, typename Kernel>
inline int64_t grid_blocks(Kernel kernel, int64_t rows, int64_t shared_bytes) {
  const KernelFacts facts = kernel_facts(kernel, kWarps * 32, shared_bytes);
  const int64_t wanted = (rows + kWarps * kRowsPerWarp - 1) / (kWarps * kRowsPerWarp);
  return std::min<int64_t>(wanted, int64_t(facts.sms) * std::max(facts.blocks_per_sm, 1));
}

// Launches `kernel` over `blocks` blocks of kWarps warps (grid_blocks), or over its persistent
// grid when `blocks` is 0.
template <int kWarps, typename T, typename Kernel>
inline void launch(Kernel kernel, const Params<T>& p, int64_t shared_bytes, cudaStream_t stream,
                   int64_t blocks = 0) {
  if (p.rows == 0) return;
  if (blocks == 0) blocks = grid_blocks<kWarps>(kernel, p.rows, shared_bytes);
  kernel<<<static_cast<unsigned>(blocks), kWarps * 32, static_cast<size_t>(shared_bytes), stream>>>(
      p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The opt-in shared memory of one block on the current device.
inline int64_t shared_limit() {
  return device_attribute<cudaDevAttrMaxSharedMemoryPerBlockOptin>();
}

// A launch's parameters from the op's tensors (x, weights, biases, y contiguous; saved
// (rows, saved_columns) or empty).
template <typename T>
Params<T> make_params(const Network& net, const at::Tensor& x,
                      const std::vector<at::Tensor>& weights, const std::vector<at::Tensor>& biases,
                      const at::Tensor& y, const at::Tensor& saved) {
  Params<T> p{};
  p.x = x.const_data_ptr<T>();
  for (int l = 0; l < net.layers(); ++l) {
    p.weight[l] = weights[l].const_data_ptr<T>();
    p.bias[l] = net.bias ? biases[l].const_data_ptr<T>() : nullptr;
  }
  p.y = const_cast<T*>(y.const_data_ptr<T>());
  p.rows = row_count(x);
  const bool kept = saved.dim() == 2 && saved.numel() > 0;
  p.saved = kept ? const_cast<T*>(saved.const_data_ptr<T>()) : nullptr;
  p.saved_stride = net.saved_columns();
  for (int l = 1; l <= net.layers(); ++l) {
    p.output_column[l] = net.output_column(l);
    p.preactivation_column[l] = net.preactivation_column(l);
  }
  return p;
}

// The Hopper (sm_90a, wgmma) forward, opgen/mlp_hopper.cuh: true where it ran.
template <typename T, class Net, Activation kHidden, Activation kOut, bool kBias>
bool forward_hopper(const Params<T>& p, cudaStream_t stream);

// The Hopper kernel where it runs; else every layer's weights in shared memory at once where they
// fit (else one layer at a time), with the saved tiles where those fit too.
template <typename T, class Net, Activation kHidden, Activation kOut, bool kBias>
void forward(const Params<T>& p, cudaStream_t stream) {
  if (forward_hopper<T, Net, kHidden, kOut, kBias>(p, stream)) return;
  constexpr int kWarps = forward_warps<T, Net>();
  constexpr bool kStage = stages_saved<T, Net, kHidden, kOut, kWarps>();
  using Staged = Layout<T, Net, kWarps, Net::width(0),
                        SavedTile<T, Saved<Net, kHidden, kOut>::columns()>::kElements>;
  using L = Layout<T, Net, kWarps, Net::width(0)>;
  const int64_t limit = shared_limit();
  if (kStage && Staged::bytes(true) <= limit) {
    launch<kWarps>(forward_kernel<T, Net, kHidden, kOut, kBias, true, kStage>, p,
                   Staged::bytes(true), stream);
  } else if (L::bytes(true) <= limit) {
    launch<kWarps>(forward_kernel<T, Net, kHidden, kOut, kBias, true, false>, p, L::bytes(true),
                   stream);
  } else {
    launch<kWarps>(forward_kernel<T, Net, kHidden, kOut, kBias, false, false>, p, L::bytes(false),
                   stream);
  }
}

// dW = G^T in (G: rows x out and dW: out x in, contiguous; in: rows x in, its rows possibly
// strided, e.g. a_l's columns of what the forward kept) on `stream`: cuBLASLt's GEMM (the
// heuristic's best kWeightGemmCandidates algorithms, with a workspace that lets it offer split-K
// ones, timed once per problem) or ATen's, whichever cost less a call the first time the problem
// came (opgen/linear_cublaslt.h's weight_and_bias_gradients); later calls take that choice, so the
// bits repeat (under torch.use_deterministic_algorithms nothing is timed: ATen's, in every
// process). `workspace`: cuBLASLt's, `workspace_bytes` long (kWeightGemmWorkspaceBytes), on 256
// bytes. Defined in the op's <op>_cuda_gemm.cpp: host code the C++ compiler builds, since nvcc
// may not see cuBLASLt's header.
void weight_gradient(const at::Tensor& grad_pre, const at::Tensor& input, at::Tensor& grad_weight,
                     void* workspace, int64_t workspace_bytes, cudaStream_t stream);

// A weight gradient's K is the batch (up to millions of rows) and its M x N at most 128 x 128:
// the fast kernels split K over many blocks. cuBLASLt's heuristic offers those only with room for
// their partial results: this much workspace.
constexpr int64_t kWeightGemmWorkspaceBytes = int64_t{32} << 20;

// Layer l's (0-based) bias gradient (grads[2 + 2 * l]) as sum_partials' target: its columns of
// the backward blocks' column sums (BiasSums).
template <typename T, class Net>
opgen::PartialRows<T, float> bias_target(const Network& net, const float* partial, int l,
                                         std::vector<at::Tensor>& grads) {
  using Sums = BiasSums<Net>;
  return {grads[2 + 2 * l].mutable_data_ptr<T>(), partial + Sums::offset(l + 1), net.widths[l + 1],
          Sums::columns()};
}

// Layer l's (0-based) weight gradient (grads[1 + (2 or 1) * l]) as sum_partials' target: the
// blocks' partials of its widths[l + 1] x widths[l] elements, `columns` a block apart.
template <typename T>
opgen::PartialRows<T, float> weight_target(const Network& net, const float* partial, int l,
                                           int64_t columns, std::vector<at::Tensor>& grads) {
  return {grads[1 + (net.bias ? 2 : 1) * l].mutable_data_ptr<T>(), partial,
          net.widths[l + 1] * net.widths[l], columns};
}

// The backward with the weight gradients in the kernel (FusedPlan, WeightGrads): x's gradient,
// each block's partial dW_l and bias column sums, then sum_partials adds the partials in a fixed
// order. No G_l is written. rows > 0.
template <typename T, class Net, Activation kHidden, Activation kOut>
void backward_fused(const Network& net, Params<T> p, const at::Tensor& x2,
                    std::vector<at::Tensor>& grads, cudaStream_t stream) {
  using Fused = FusedPlan<T, Net, kHidden, kOut>;
  using Grads = typename Fused::Grads;
  using Sums = BiasSums<Net>;
  constexpr int kLayers = Net::kLayers;
  const int64_t bytes = Fused::template Shared<Fused::kTiles>::bytes(true);
  const auto kernel = backward_kernel<T, Net, kHidden, kOut, true, Fused::kTiles, true, true>;
  const int64_t blocks = grid_blocks<kFusedWarps>(kernel, p.rows, bytes);
  const int64_t bias_columns = net.bias ? Sums::columns() : 0;
  const at::Tensor partial =
      at::empty({blocks * (Grads::columns() + bias_columns)}, x2.options().dtype(at::kFloat));
  float* const first = partial.mutable_data_ptr<float>();
  p.weight_partial = first;
  p.bias_partial = net.bias ? first + blocks * Grads::columns() : nullptr;
  for (int l = 0; l <= kLayers; ++l) p.grad_pre[l] = nullptr;
  launch<kFusedWarps>(kernel, p, bytes, stream, blocks);
  // Every weight and bias gradient: the blocks' partials added in a fixed order (sum_partials).
  opgen::PartialRows<T, float> targets[2 * kLayers];
  int count = 0;
  for (int l = 0; l < kLayers; ++l) {
    targets[count++] =
        weight_target<T>(net, first + Grads::partial_offset(l), l, Grads::columns(), grads);
    if (net.bias) targets[count++] = bias_target<T, Net>(net, p.bias_partial, l, grads);
  }
  opgen::sum_partials_of(targets, count, blocks, stream);
}

// Every gradient of the fused types into `grads` (empty_gradients: x's, then each layer's weight
// and bias). Where FusedPlan applies (16-bit types, networks whose tiles fit), backward_fused.
// Else the backward kernel writes x's gradient and each G_l (per layer, contiguous, on 16 bytes)
// and, with a bias, the blocks' column sums, which sum_partials adds up; the weight
// gradients dW_l = G_l^T a_{l-1} are then one GEMM a layer (weight_gradient), except dW_L where
// the kernel added it up (last_weights_in_kernel: G_L is then neither written nor allocated).
// `p` is make_params' with grad_out and grad_x set; x2 is x as (rows, widths[0]), `kept` what the
// forward kept.
template <typename T, class Net, Activation kHidden, Activation kOut>
void backward(const Network& net, Params<T> p, const at::Tensor& x2, const at::Tensor& kept,
              std::vector<at::Tensor>& grads, cudaStream_t stream) {
  using Fused = FusedPlan<T, Net, kHidden, kOut>;
  if constexpr (Fused::kUsable) {
    if (p.rows > 0 && Fused::template Shared<Fused::kTiles>::bytes(true) <= shared_limit()) {
      backward_fused<T, Net, kHidden, kOut>(net, p, x2, grads, stream);
      return;
    }
  }
  constexpr int kWarps = backward_warps<T>();
  constexpr int kLayers = Net::kLayers;
  using Plan = BackwardPlan<T, Net, kHidden, kOut, kWarps>;
  using Sums = BiasSums<Net>;
  const int64_t rows = p.rows;
  const int per_layer = net.bias ? 2 : 1;

  // The most that fits in this device's shared memory: the plan, every weight resident with
  // nothing staged, or one layer's weights at a time.
  const int64_t limit = shared_limit();
  using Planned = typename Plan::template Shared<Plan::kTiles, Plan::kStage>;
  using Resident = typename Plan::template Shared<0, false>;
  auto kernel = backward_kernel<T, Net, kHidden, kOut, false, 0, false>;
  int64_t bytes = Resident::bytes(false);
  bool last_in_kernel = false;  // dW_L added up by the backward kernel (last_weights_in_kernel)
  if ((Plan::kTiles > 0 || Plan::kStage) && Planned::bytes(true) <= limit) {
    kernel = backward_kernel<T, Net, kHidden, kOut, true, Plan::kTiles, Plan::kStage>;
    bytes = Planned::bytes(true);
    last_in_kernel = rows > 0 && last_weights_in_kernel<T, Net, kOut, Plan::kTiles, false>();
  } else if (Resident::bytes(true) <= limit) {
    kernel = backward_kernel<T, Net, kHidden, kOut, true, 0, false>;
    bytes = Resident::bytes(true);
  }
  // One allocation for what the backward writes for itself (a small batch's step is bound by the
  // host, where each allocation costs microseconds): the G_l the weight GEMMs read, each on 16
  // bytes; the blocks' partials (the bias column sums, then with last_in_kernel dW_L's); and the
  // GEMMs' cuBLASLt workspace, each on 256 bytes.
  const int written = kLayers - (last_in_kernel ? 1 : 0);
  const auto round_up = [](int64_t n, int64_t step) {
    return (n + step - 1) / step * step;
  };
  int64_t offset[kLayers + 1] = {};
  int64_t total = 0;
  for (int l = 1; l <= written; ++l) {
    offset[l] = total;
    total += round_up(rows * net.widths[l], 16 / sizeof(T));
  }
  const int64_t blocks = rows > 0 ? grid_blocks<kWarps>(kernel, rows, bytes) : 0;
  const int64_t bias_columns = net.bias ? Sums::columns() : 0;
  const int64_t last_columns = last_in_kernel ? net.widths[kLayers] * net.widths[kLayers - 1] : 0;
  const int64_t partial_at = round_up(total * int64_t{sizeof(T)}, 256);
  const int64_t workspace_at =
      round_up(partial_at + blocks * (bias_columns + last_columns) * int64_t{sizeof(float)}, 256);
  const int64_t scratch_bytes = workspace_at + (written > 0 ? kWeightGemmWorkspaceBytes : 0);
  const at::Tensor scratch =
      at::empty({round_up(scratch_bytes, sizeof(T)) / int64_t{sizeof(T)}}, x2.options());
  T* const grad_pre = scratch.mutable_data_ptr<T>();
  unsigned char* const base = reinterpret_cast<unsigned char*>(grad_pre);
  float* const partial = reinterpret_cast<float*>(base + partial_at);
  for (int l = 1; l <= kLayers; ++l) p.grad_pre[l] = l <= written ? grad_pre + offset[l] : nullptr;

  if (rows > 0) {
    if (net.bias) p.bias_partial = partial;
    if (last_in_kernel) p.weight_partial = partial + blocks * bias_columns;
    launch<kWarps>(kernel, p, bytes, stream, blocks);
    opgen::PartialRows<T, float> targets[kLayers + 1];
    int count = 0;
    if (net.bias) {
      for (int l = 0; l < kLayers; ++l)
        targets[count++] = bias_target<T, Net>(net, partial, l, grads);
    }
    if (last_in_kernel) {
      targets[count++] = weight_target<T>(net, p.weight_partial, kLayers - 1, last_columns, grads);
    }
    if (count > 0) opgen::sum_partials_of(targets, count, blocks, stream);
  } else if (net.bias) {
    for (int l = 0; l < kLayers; ++l) grads[2 + per_layer * l].zero_();
  }
  // The weight gradients the backward kernel did not add up: one GEMM each (weight_gradient), on
  // views made in one step each (as_strided; narrow then view would be three ATen calls).
  for (int l = 1; l <= written; ++l) {
    const at::Tensor g = scratch.as_strided({rows, net.widths[l]}, {net.widths[l], 1}, offset[l]);
    const at::Tensor input = l > 1
                                 ? kept.as_strided({rows, net.widths[l - 1]}, {kept.stride(0), 1},
                                                   kept.storage_offset() + net.output_column(l - 1))
                                 : x2;
    weight_gradient(g, input, grads[1 + per_layer * (l - 1)], base + workspace_at,
                    kWeightGemmWorkspaceBytes, stream);
  }
}

}  // namespace opgen::mlp

#include "opgen/mlp_hopper.cuh"  // forward_hopper
