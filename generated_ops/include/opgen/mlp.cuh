// The fully fused MLP (the mlp layout): the whole network in one kernel, forward, and one for the
// input gradient, after the idea of tiny-cuda-nn's "fully fused" networks (Müller et al. 2021):
// for narrow layers the weights fit in shared memory and a warp's rows stay on chip through every
// layer, so the network costs about one read of x and one write of y.
//
//   * Each block stages every layer's weights once into swizzled shared tiles
//   (opgen/tensor_core.cuh)
//     and then walks rows, 16 per warp at a time (a persistent grid). Where all the weights do not
//     fit (wide, deep float32 networks) a block stages one layer at a time instead, per block of
//     rows, and the warps step through the layers together.
//   * A warp's activations stay in registers from layer to layer: the float accumulator of an
//     m16n8 MMA holds, per thread, the same rows and column pairs that the next layer's A
//     fragment wants, so a layer's output becomes the next layer's input by a conversion, with no
//     shared-memory round trip (for tf32, whose A fragment holds columns k and k+4 where the
//     accumulator holds 2k and 2k+1, the weights' columns are permuted within each group of 8
//     when staged, which renumbers k to match).
//   * Widths are padded inside (zero weights, zero bias) to 16, 32, 64 or 128, the swizzled
//     tiles' row lengths; the user's tensors are read and written at their own widths.
//   * bfloat16/float16 multiply in their own type with float accumulation, rounding each layer's
//     output to the type as eager PyTorch does; float32 multiplies in tf32 (only called where
//     allow_tf32 permits it) and keeps float activations.
//
// The backward kernel reads what the forward kept (opgen/mlp.h: each hidden output and, for GELU
// and SiLU, the pre-activations), carries the gradient from the output to x through the
// transposed weights the same way, and writes x's gradient and each layer's pre-activation
// gradient; the weight and bias gradients are then GEMMs and sums over rows (ATen, in a fixed
// order: deterministic, no atomics).
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
#include <utility>

#include "opgen/activations.cuh"
#include "opgen/mlp.h"
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

// One warp's activations: columns of 16 rows in the accumulator layout (tensor_core.cuh:
// element i of tile t is row group + 8*(i/2), column 8t + 2*quad_lane + i%2), as floats.
template <int kMaxPadded>
struct Rows {
  float v[kMaxPadded / 8][4];
};

// The A fragment of k-step `kt` from the activations held in the accumulator layout.
template <typename T, int kMaxPadded>
__device__ __forceinline__ tc::FragmentA a_fragment(const Rows<kMaxPadded>& h, int kt) {
  tc::FragmentA a;
  if constexpr (std::is_same_v<T, float>) {
    // m16n8k8: registers hold (g, k=q), (g+8, q), (g, q+4), (g+8, q+4); physical q is logical 2q.
    a.reg[0] = tc::to_tf32(h.v[kt][0]);
    a.reg[1] = tc::to_tf32(h.v[kt][2]);
    a.reg[2] = tc::to_tf32(h.v[kt][1]);
    a.reg[3] = tc::to_tf32(h.v[kt][3]);
  } else {
    // m16n8k16: k-step kt spans accumulator tiles 2kt and 2kt+1.
    a.reg[0] = pack2<T>(h.v[2 * kt][0], h.v[2 * kt][1]);
    a.reg[1] = pack2<T>(h.v[2 * kt][2], h.v[2 * kt][3]);
    a.reg[2] = pack2<T>(h.v[2 * kt + 1][0], h.v[2 * kt + 1][1]);
    a.reg[3] = pack2<T>(h.v[2 * kt + 1][2], h.v[2 * kt + 1][3]);
  }
  return a;
}

// out (16 x kN) = h (16 x kK) times the staged tile's transpose ([kN][kK], n-major).
template <typename T, int kK, int kN, int kMaxPadded>
__device__ __forceinline__ void warp_layer(const Rows<kMaxPadded>& h, const T* tile,
                                           tc::Accumulator (&acc)[kMaxPadded / 8], int lane) {
  using Tile = tc::SwizzledTile<T, kN, kK>;
  constexpr int kStep = tc::Mma<T>::kK;
#pragma unroll
  for (int nt = 0; nt < kN / 8; ++nt) acc[nt] = tc::Accumulator{};
#pragma unroll
  for (int kt = 0; kt < kK / kStep; ++kt) {
    const tc::FragmentA a = a_fragment<T>(h, kt);
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt) {
      tc::FragmentB b;
      if constexpr (std::is_same_v<T, float>) {
        tc::load_b_tf32<Tile, false>(b, tile, nt * 8, kt * kStep, lane);
      } else {
        tc::load_b16<Tile, false>(b, tile, nt * 8, kt * kStep, lane);
      }
      tc::Mma<T>::run(acc[nt], a, b);
    }
  }
}

// 16 rows (row0.., `valid` of them) of a (rows, cols) matrix with row stride `stride` into the
// warp's staging buffer (16 x cols, dense), then into the accumulator layout (zero past cols and
// past the valid rows). 16-byte loads where the rows are one aligned dense span.
template <typename T, int kPadded, int kMaxPadded>
__device__ __forceinline__ void load_rows(Rows<kMaxPadded>& h, const T* src, int64_t row0,
                                          int valid, int cols, int64_t stride, T* staging,
                                          int lane) {
  const T* first = src + row0 * stride;
  const int count = valid * cols;
  constexpr int kVec = 16 / sizeof(T);
  if (stride == cols && reinterpret_cast<uintptr_t>(first) % 16 == 0) {
    const int chunks = count / kVec;
    const int4* from = reinterpret_cast<const int4*>(first);
    int4* to = reinterpret_cast<int4*>(staging);
    for (int i = lane; i < chunks; i += 32) to[i] = __ldg(from + i);
    for (int i = chunks * kVec + lane; i < count; i += 32) staging[i] = first[i];
  } else {
    for (int i = lane; i < count; i += 32) {
      const int r = i / cols;
      staging[i] = first[r * stride + (i - r * cols)];
    }
  }
  __syncwarp();
#pragma unroll
  for (int t = 0; t < kPadded / 8; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const tc::FragmentCoord at = tc::accumulator_coord(lane, i);
      const int col = t * 8 + at.col;
      h.v[t][i] =
          (col < cols && at.row < valid) ? static_cast<float>(staging[at.row * cols + col]) : 0.f;
    }
  }
  __syncwarp();
}

// The inverse: `cols` columns of the accumulator layout out to 16 rows (`valid` of them).
template <typename T, int kPadded, int kMaxPadded>
__device__ __forceinline__ void store_rows(const Rows<kMaxPadded>& h, T* dst, int64_t row0,
                                           int valid, int cols, int64_t stride, T* staging,
                                           int lane) {
#pragma unroll
  for (int t = 0; t < kPadded / 8; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const tc::FragmentCoord at = tc::accumulator_coord(lane, i);
      const int col = t * 8 + at.col;
      if (col < cols) staging[at.row * cols + col] = static_cast<T>(h.v[t][i]);
    }
  }
  __syncwarp();
  T* first = dst + row0 * stride;
  const int count = valid * cols;
  constexpr int kVec = 16 / sizeof(T);
  if (stride == cols && reinterpret_cast<uintptr_t>(first) % 16 == 0) {
    const int chunks = count / kVec;
    const int4* from = reinterpret_cast<const int4*>(staging);
    int4* to = reinterpret_cast<int4*>(first);
    for (int i = lane; i < chunks; i += 32) to[i] = from[i];
    for (int i = chunks * kVec + lane; i < count; i += 32) first[i] = staging[i];
  } else {
    for (int i = lane; i < count; i += 32) {
      const int r = i / cols;
      first[r * stride + (i - r * cols)] = staging[i];
    }
  }
  __syncwarp();
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
  T* grad_pre;  // (rows, widths[1] + ... + widths[L]): each layer's pre-activation gradient
  int64_t grad_pre_column[9];
  int64_t grad_pre_stride;
};

constexpr int kWarps = 8;  // per block: 128 rows in flight, enough to hide a layer's latency
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 16;

// Shared memory: the weights' tiles (all layers, or the widest one when streaming), the biases
// (float, padded), and each warp's staging buffer (16 rows of the widest layer).
template <typename T, class Net>
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
  __host__ __device__ static constexpr int64_t bias_bytes() {
    return int64_t(Net::kLayers) * Net::max_padded() * 4;
  }
  __host__ __device__ static constexpr int64_t
  staging_elements() {  // per warp, rounded to 16 bytes
    const int64_t elements = int64_t(kRowsPerWarp) * Net::max_width();
    const int64_t vec = 16 / sizeof(T);
    return (elements + vec - 1) / vec * vec;
  }
  __host__ __device__ static constexpr int64_t bytes(bool resident) {
    return (resident ? all_weights() : widest_tile()) * int64_t(sizeof(T)) + bias_bytes() +
           kWarps * staging_elements() * int64_t(sizeof(T));
  }
};

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
// W[n][j] at row j, column n. Columns are placed where the fragment loads expect them.
template <typename T, class Net, int kLayer, bool kTranspose>
__device__ void stage_weights(T* tile, const T* weight) {
  constexpr int kOut = Net::width(kLayer + 1), kIn = Net::width(kLayer);
  constexpr int kRows = kTranspose ? padded(kIn) : padded(kOut);
  constexpr int kCols = kTranspose ? padded(kOut) : padded(kIn);
  using Tile = tc::SwizzledTile<T, kRows, kCols>;
  for (int i = threadIdx.x; i < kRows * kCols; i += blockDim.x) {
    const int r = i / kCols, c = i - r * kCols;
    const int n = kTranspose ? c : r, k = kTranspose ? r : c;
    const T v = (n < kOut && k < kIn) ? weight[n * kIn + k] : static_cast<T>(0.f);
    tile[Tile::offset(r, stored_column<T>(c))] = v;
  }
}

template <typename T, class Net>
__device__ __forceinline__ float* bias_area(unsigned char* shared, bool resident) {
  using L = Layout<T, Net>;
  return reinterpret_cast<float*>(shared +
                                  (resident ? L::all_weights() : L::widest_tile()) * sizeof(T));
}

// The forward: x (rows, widths[0]) -> y (rows, widths[L]), keeping `saved` when it is set.
template <typename T, class Net, Activation kHidden, Activation kOut, bool kBias, bool kResident>
__global__ void __launch_bounds__(kThreads) forward_kernel(const Params<T> p) {
  using L = Layout<T, Net>;
  constexpr int kMaxPadded = Net::max_padded();
  extern __shared__ __align__(16) unsigned char shared[];
  T* weights = reinterpret_cast<T*>(shared);
  float* biases = bias_area<T, Net>(shared, kResident);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  T* staging = reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(biases) + L::bias_bytes()) +
               warp * L::staging_elements();

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

  constexpr int64_t kBlockRows = int64_t(kWarps) * kRowsPerWarp;
  for (int64_t block_row0 = int64_t(blockIdx.x) * kBlockRows; block_row0 < p.rows;
       block_row0 += int64_t(gridDim.x) * kBlockRows) {
    const int64_t row0 = block_row0 + int64_t(warp) * kRowsPerWarp;
    const int valid =
        row0 < p.rows ? static_cast<int>(min(int64_t(kRowsPerWarp), p.rows - row0)) : 0;
    Rows<kMaxPadded> h;
    tc::Accumulator acc[kMaxPadded / 8];
    if (valid > 0) {
      load_rows<T, padded(Net::width(0))>(h, p.x, row0, valid, Net::width(0), Net::width(0),
                                          staging, lane);
    }
    static_for<0, Net::kLayers>([&](auto layer) {
      constexpr int l = decltype(layer)::value;
      constexpr int kK = padded(Net::width(l)), kN = padded(Net::width(l + 1));
      constexpr bool kLast = l + 1 == Net::kLayers;
      constexpr Activation kAct = kLast ? kOut : kHidden;
      if constexpr (!kResident) {
        __syncthreads();  // every warp is done with the previous layer's tile
        stage_weights<T, Net, l, false>(weights, p.weight[l]);
        __syncthreads();
      }
      if (valid == 0) return;
      const T* tile = weights + (kResident ? L::weight_offset(l) : 0);
      warp_layer<T, kK, kN>(h, tile, acc, lane);
      const float* bias = biases + l * kMaxPadded;
#pragma unroll
      for (int t = 0; t < kN / 8; ++t) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float z = acc[t].value[i] + bias[t * 8 + tc::accumulator_coord(lane, i).col];
          if constexpr (!std::is_same_v<T, float>) z = round_to<T>(z);  // eager's GEMM output
          acc[t].value[i] = z;
          float a = activate<kAct>(z);
          if constexpr (!std::is_same_v<T, float>) a = round_to<T>(a);
          h.v[t][i] = a;
        }
      }
      if (p.saved != nullptr) {
        if constexpr (!kLast) {
          store_rows<T, kN>(h, p.saved + p.output_column[l + 1], row0, valid, Net::width(l + 1),
                            p.saved_stride, staging, lane);
        }
        if constexpr (reads_preactivation(kAct)) {
          Rows<kMaxPadded> z;
#pragma unroll
          for (int t = 0; t < kN / 8; ++t) {
#pragma unroll
            for (int i = 0; i < 4; ++i) z.v[t][i] = acc[t].value[i];
          }
          store_rows<T, kN>(z, p.saved + p.preactivation_column[l + 1], row0, valid,
                            Net::width(l + 1), p.saved_stride, staging, lane);
        }
      }
      if constexpr (kLast) {
        store_rows<T, kN>(h, p.y, row0, valid, Net::width(l + 1), Net::width(l + 1), staging, lane);
      }
    });
  }
}

// The input gradient, and each layer's pre-activation gradient (for the weight and bias GEMMs).
template <typename T, class Net, Activation kHidden, Activation kOut, bool kResident>
__global__ void __launch_bounds__(kThreads) backward_kernel(const Params<T> p) {
  using L = Layout<T, Net>;
  constexpr int kMaxPadded = Net::max_padded();
  constexpr int kLayers = Net::kLayers;
  extern __shared__ __align__(16) unsigned char shared[];
  T* weights = reinterpret_cast<T*>(shared);
  float* biases = bias_area<T, Net>(shared, kResident);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  T* staging = reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(biases) + L::bias_bytes()) +
               warp * L::staging_elements();
  if constexpr (kResident) {
    static_for<0, kLayers>([&](auto layer) {
      constexpr int l = decltype(layer)::value;
      stage_weights<T, Net, l, true>(weights + L::weight_offset(l), p.weight[l]);
    });
  }
  __syncthreads();

  constexpr int64_t kBlockRows = int64_t(kWarps) * kRowsPerWarp;
  constexpr int kOutWidth = Net::width(kLayers);
  constexpr int kOutPadded = padded(kOutWidth);
  for (int64_t block_row0 = int64_t(blockIdx.x) * kBlockRows; block_row0 < p.rows;
       block_row0 += int64_t(gridDim.x) * kBlockRows) {
    const int64_t row0 = block_row0 + int64_t(warp) * kRowsPerWarp;
    const int valid =
        row0 < p.rows ? static_cast<int>(min(int64_t(kRowsPerWarp), p.rows - row0)) : 0;
    Rows<kMaxPadded> g;
    tc::Accumulator acc[kMaxPadded / 8];
    if (valid > 0) {
      load_rows<T, kOutPadded>(g, p.grad_out, row0, valid, kOutWidth, kOutWidth, staging, lane);
      if constexpr (kOut != Activation::kNone) {
        Rows<kMaxPadded> s;
        if constexpr (reads_preactivation(kOut)) {
          load_rows<T, kOutPadded>(s, p.saved + p.preactivation_column[kLayers], row0, valid,
                                   kOutWidth, p.saved_stride, staging, lane);
        } else {
          load_rows<T, kOutPadded>(s, p.y, row0, valid, kOutWidth, kOutWidth, staging, lane);
        }
#pragma unroll
        for (int t = 0; t < kOutPadded / 8; ++t) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            float v = g.v[t][i] * derivative<kOut>(s.v[t][i]);
            if constexpr (!std::is_same_v<T, float>) v = round_to<T>(v);
            g.v[t][i] = v;
          }
        }
      }
    }
    static_for<0, kLayers>([&](auto step) {
      constexpr int l = kLayers - 1 - decltype(step)::value;  // from the last layer to the first
      constexpr int kIn = padded(Net::width(l)), kOutN = padded(Net::width(l + 1));
      if constexpr (!kResident) {
        __syncthreads();
        stage_weights<T, Net, l, true>(weights, p.weight[l]);
        __syncthreads();
      }
      if (valid == 0) return;
      const T* tile = weights + (kResident ? L::weight_offset(l) : 0);
      store_rows<T, kOutN>(g, p.grad_pre + p.grad_pre_column[l + 1], row0, valid, Net::width(l + 1),
                           p.grad_pre_stride, staging, lane);
      warp_layer<T, kOutN, kIn>(g, tile, acc, lane);
      if constexpr (l > 0) {
        Rows<kMaxPadded> s;
        if constexpr (kHidden != Activation::kNone) {
          const int64_t column =
              reads_preactivation(kHidden) ? p.preactivation_column[l] : p.output_column[l];
          load_rows<T, kIn>(s, p.saved + column, row0, valid, Net::width(l), p.saved_stride,
                            staging, lane);
        }
#pragma unroll
        for (int t = 0; t < kIn / 8; ++t) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            float v = acc[t].value[i];
            if constexpr (kHidden != Activation::kNone) {
              if constexpr (!std::is_same_v<T, float>) v = round_to<T>(v);  // eager's GEMM output
              v *= derivative<kHidden>(s.v[t][i]);
            }
            if constexpr (!std::is_same_v<T, float>) v = round_to<T>(v);
            g.v[t][i] = v;
          }
        }
      } else {
        Rows<kMaxPadded> d;
#pragma unroll
        for (int t = 0; t < kIn / 8; ++t) {
#pragma unroll
          for (int i = 0; i < 4; ++i) d.v[t][i] = acc[t].value[i];
        }
        store_rows<T, kIn>(d, p.grad_x, row0, valid, Net::width(0), Net::width(0), staging, lane);
      }
    });
  }
}

// Launches `kernel` over a persistent grid: as many blocks as fit on the device at once (each
// stages the weights once), and no more than there are rows for.
template <typename T, typename Kernel>
inline void launch(Kernel kernel, const Params<T>& p, int64_t shared_bytes, cudaStream_t stream) {
  if (p.rows == 0) return;
  int device = 0, sms = 0, per_sm = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(shared_bytes)));
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kThreads,
                                                               static_cast<size_t>(shared_bytes)));
  const int64_t wanted = (p.rows + kWarps * kRowsPerWarp - 1) / (kWarps * kRowsPerWarp);
  const int64_t blocks = std::min<int64_t>(wanted, int64_t(sms) * std::max(per_sm, 1));
  kernel<<<static_cast<unsigned>(blocks), kThreads, static_cast<size_t>(shared_bytes), stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Whether every layer's weights fit in one block's shared memory at once (else one at a time).
template <typename T, class Net>
inline bool weights_resident() {
  int device = 0, limit = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return Layout<T, Net>::bytes(true) <= limit;
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

template <typename T, class Net, Activation kHidden, Activation kOut, bool kBias>
void forward(const Params<T>& p, cudaStream_t stream) {
  if (weights_resident<T, Net>()) {
    launch(forward_kernel<T, Net, kHidden, kOut, kBias, true>, p, Layout<T, Net>::bytes(true),
           stream);
  } else {
    launch(forward_kernel<T, Net, kHidden, kOut, kBias, false>, p, Layout<T, Net>::bytes(false),
           stream);
  }
}

template <typename T, class Net, Activation kHidden, Activation kOut>
void backward(const Params<T>& p, cudaStream_t stream) {
  if (weights_resident<T, Net>()) {
    launch(backward_kernel<T, Net, kHidden, kOut, true>, p, Layout<T, Net>::bytes(true), stream);
  } else {
    launch(backward_kernel<T, Net, kHidden, kOut, false>, p, Layout<T, Net>::bytes(false), stream);
  }
}

}  // namespace opgen::mlp
