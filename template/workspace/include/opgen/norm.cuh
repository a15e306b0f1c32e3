// The norm engine: the CUDA kernels of LayerNorm and RMSNorm over the last dimension, forward and
// backward, with an optional fused residual add (h = x + residual, normalized and returned). An
// op states two things at compile time, whether it centers (LayerNorm subtracts the mean,
// RMSNorm does not) and whether it adds a residual; the engine supplies the kernels by row
// length, the planner, and the deterministic weight and bias gradients.
//
// Norms differ from the row engine's ops (row_engine.cuh) in three ways, which is why they have
// kernels of their own built from the same pieces (its load_span layout, reduce.cuh's group and
// cluster all-reductions, vec.cuh's packs): each output element reads a per-column parameter
// (weight, bias), the forward writes per-row statistics (mean, rstd) for the backward, and the
// backward sums dy * xhat and dy over every row into per-column gradients. Those sums are taken
// without float atomics: each block (or cluster) accumulates its rows in float registers and
// writes one partial row, and a second small kernel adds the partial rows in a fixed order. Same
// inputs, same bits.
//
// Paths by row length, as in the row engine: rows of up to 16384 values (8192 for the backward,
// which holds x, dy and the two gradient accumulators) sit in the registers of a few lanes, a
// warp, or up to 16 warps; longer rows up to 16 times that are split over a cluster of blocks on
// sm_90 (one DRAM read); anything longer reads the row twice, a block per row.
#pragma once

#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "opgen/launch.cuh"
#include "opgen/reduce.cuh"
#include "opgen/row_engine.cuh"
#include "opgen/vec.cuh"

namespace opgen {
namespace norm {

using row_engine::ceil_div;
using row_engine::kMaxClusterBlocks;
using row_engine::kMaxRowThreads;
using row_engine::kRegisterRowColsPerThread;

// The count, mean and sum of squared deviations of some values. Two merge exactly (Chan, Golub
// and LeVeque, "Updating formulae and a pairwise algorithm for computing sample variances",
// 1979), so a row reduced in pieces over lanes, warps and blocks keeps the accuracy of a two-pass
// variance: a row of constant values has variance exactly 0.
template <typename M>
struct Moments {
  M count;
  M mean;
  M m2;
};

struct MergeMoments {
  template <typename M>
  __device__ __forceinline__ Moments<M> operator()(const Moments<M>& a, const Moments<M>& b) const {
    const M count = a.count + b.count;
    if (count == M(0)) return a;
    const M delta = b.mean - a.mean;
    const M b_share = b.count / count;
    return {count, a.mean + delta * b_share, a.m2 + b.m2 + delta * delta * a.count * b_share};
  }
};

// A reduction as cluster_allreduce (row_engine.cuh) takes it: a State, its Combine and identity.
template <typename State, typename CombineOp>
struct Reduction {
  using Combine = CombineOp;
  static constexpr int kInputs = 1;
  __device__ static State identity() { return State{}; }
};

// The backward's two row sums: sum(g) and sum(g * xhat), g = dy * weight.
template <typename M>
struct GradSums {
  M g;
  M g_xhat;
};

struct AddGradSums {
  template <typename M>
  __device__ __forceinline__ GradSums<M> operator()(const GradSums<M>& a,
                                                    const GradSums<M>& b) const {
    return {a.g + b.g, a.g_xhat + b.g_xhat};
  }
};

// a * b rounded once, never fused into a following add: the backward takes g = dy * weight in
// its row sum and again in each dx = rstd * (g - mean(g) - ...), and a row of one value must
// get g - mean(g) = 0 exactly (a fused multiply-add there left rstd times the product's rounding,
// 5e-6 in float32 at eps 1e-5).
__device__ __forceinline__ float product(float a, float b) {
  return __fmul_rn(a, b);
}

__device__ __forceinline__ double product(double a, double b) {
  return __dmul_rn(a, b);
}

// What the kernels read and write. T is the tensors' dtype, M its math type (float for half and
// bfloat16, double for double), W the parameters' (T, or M where a half-precision x comes with
// float32 parameters: the host converts the other one, a few KB); statistics are M a row.
template <typename T, typename W>
struct ForwardArgs {
  using M = at::opmath_type<T>;
  T* y;
  T* sum;  // x + residual, when the op adds one
  const T* x;
  const T* residual;  // or null
  const W* weight;    // or null: 1
  const W* bias;      // or null: 0
  M* mean;            // a row; null for RMSNorm
  M* rstd;            // a row
  int64_t rows;
  int64_t cols;
  M eps;
};

template <typename T, typename W>
struct BackwardArgs {
  using M = at::opmath_type<T>;
  T* dx;
  const T* dy;
  const T* x;       // the normalized input: x, or the sum x + residual
  const T* dsum;    // the gradient of the sum output, or null
  const W* weight;  // or null
  const M* mean;    // null for RMSNorm
  const M* rstd;
  M* partial_dweight;  // [partials][cols], or null when there is no weight
  M* partial_dbias;    // [partials][cols], or null when there is no bias
  int64_t rows;
  int64_t cols;
};

// ---- Register rows: a row in the registers of kThreadsPerRow threads, laid out as the row
// engine's load_span lays it (thread `lane` holds packs lane, lane + kThreadsPerRow, ...), so
// each load instruction of a row's threads covers one contiguous stretch. With cluster_blocks > 1
// (kThreadsPerRow == the block) block r of a cluster holds columns [r * slice_cols, ...). ----

template <int kThreadsPerRow>
constexpr int block_threads_for() {
  return std::max(128, kThreadsPerRow);
}

// The column of slot p's pack for thread `lane`.
template <int kPack, int kThreadsPerRow>
__device__ __forceinline__ int64_t pack_col(int p, int lane) {
  return (int64_t{p} * kThreadsPerRow + lane) * kPack;
}

template <typename T, int kPack, typename M>
__device__ __forceinline__ void load_values(M (&v)[kPack], const T* ptr) {
  const auto pack = load_pack<T, kPack>(ptr);
#pragma unroll
  for (int j = 0; j < kPack; ++j) v[j] = widen<M>(pack, j);
}

// Parameter values of a pack's columns (M), or `fallback` where there is no parameter.
template <int kPack, typename M, typename W>
__device__ __forceinline__ void load_parameter(M (&v)[kPack], const W* param, int64_t col,
                                               M fallback) {
  if (param == nullptr) {
#pragma unroll
    for (int j = 0; j < kPack; ++j) v[j] = fallback;
  } else {
    load_values<W, kPack>(v, param + col);
  }
}

// Reduces `value` over a row's threads (and, with clusters, over its blocks); every thread of
// the row gets the same bits. With clusters the caller must wait_for_cluster_readers() before
// the next row's reduction (row_engine::cluster_allreduce): after its stores, which overlap the
// wait.
template <int kThreadsPerRow, typename State, typename Combine>
__device__ __forceinline__ State row_allreduce(State value, Combine combine, State* scratch,
                                               State* published, int cluster_blocks) {
  value = group_allreduce_with<kThreadsPerRow>(value, combine, State{}, scratch);
  if (cluster_blocks > 1) {
    value =
        row_engine::cluster_allreduce<Reduction<State, Combine>>(value, published, cluster_blocks);
  }
  return value;
}

template <typename T, typename W, bool kCentered, bool kResidual, int kPack, int kColsPerThread,
          int kThreadsPerRow>
__global__ void __launch_bounds__(block_threads_for<kThreadsPerRow>(),
                                  row_engine::kMinBlocksPerSm<T>)
    forward_rows_kernel(ForwardArgs<T, W> a, int64_t slice_cols, int cluster_blocks) {
  using M = at::opmath_type<T>;
  constexpr int kBlockThreads = block_threads_for<kThreadsPerRow>();
  constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  constexpr int kPacks = kColsPerThread / kPack;
  static_assert(kColsPerThread % kPack == 0, "a thread holds whole packs");
  using State = std::conditional_t<kCentered, Moments<M>, M>;
  using Combine = std::conditional_t<kCentered, MergeMoments, SumOp>;
  __shared__ State scratch[kBlockThreads / kWarpSize];
  __shared__ State published;
  const int lane = threadIdx.x % kThreadsPerRow;
  const int row_in_block = threadIdx.x / kThreadsPerRow;
  const int rank = blockIdx.x % cluster_blocks;
  const int64_t slice_begin = rank * slice_cols;
  const int64_t slice_length = max(int64_t{0}, min(a.cols - slice_begin, slice_cols));
  const int64_t groups = gridDim.x / cluster_blocks;
  // The whole block (cluster) steps together, so every thread reaches the barriers.
  for (int64_t first_row = blockIdx.x / cluster_blocks * kRowsPerBlock; first_row < a.rows;
       first_row += groups * kRowsPerBlock) {
    const bool row_valid = first_row + row_in_block < a.rows;
    const int64_t row = min(first_row + row_in_block, a.rows - 1);
    const int64_t offset = row * a.cols + slice_begin;
    M v[kPacks][kPack];
    int valid = 0;
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
      if (col < slice_length) {
        load_values<T, kPack>(v[p], a.x + offset + col);
        if constexpr (kResidual) {
          M r[kPack];
          load_values<T, kPack>(r, a.residual + offset + col);
          // The sum is rounded to T before it is normalized, as x + residual in T would be: the
          // backward reads that rounded sum.
#pragma unroll
          for (int j = 0; j < kPack; ++j) v[p][j] = static_cast<M>(static_cast<T>(v[p][j] + r[j]));
        }
        valid += kPack;
      } else {
#pragma unroll
        for (int j = 0; j < kPack; ++j) v[p][j] = M(0);
      }
    }
    State state;
    if constexpr (kCentered) {
      M total = 0;
#pragma unroll
      for (int p = 0; p < kPacks; ++p)
#pragma unroll
        for (int j = 0; j < kPack; ++j) total += v[p][j];
      const M local_mean = valid > 0 ? total / M(valid) : M(0);
      M m2 = 0;
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        if (pack_col<kPack, kThreadsPerRow>(p, lane) < slice_length) {
#pragma unroll
          for (int j = 0; j < kPack; ++j) m2 += (v[p][j] - local_mean) * (v[p][j] - local_mean);
        }
      }
      state = {M(valid), local_mean, m2};
    } else {
      M squares = 0;
#pragma unroll
      for (int p = 0; p < kPacks; ++p)
#pragma unroll
        for (int j = 0; j < kPack; ++j) squares += v[p][j] * v[p][j];
      state = squares;
    }
    state = row_allreduce<kThreadsPerRow>(state, Combine(), scratch, &published, cluster_blocks);
    M mean = 0;
    M variance;
    if constexpr (kCentered) {
      mean = state.mean;
      variance = state.m2 / M(a.cols);
    } else {
      variance = state / M(a.cols);
    }
    const M rstd = M(1) / sqrt(variance + a.eps);  // sqrt, then divide: rsqrtf is 2 ulp
    if (row_valid) {
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
        if (col < slice_length) {
          M w[kPack], b[kPack];
          load_parameter<kPack>(w, a.weight ? a.weight + slice_begin : nullptr, col, M(1));
          load_parameter<kPack>(b, a.bias ? a.bias + slice_begin : nullptr, col, M(0));
          Pack<T, kPack> out;
#pragma unroll
          for (int j = 0; j < kPack; ++j)
            out.elem[j] = static_cast<T>((v[p][j] - mean) * rstd * w[j] + b[j]);
          store_pack<T, kPack>(a.y + offset + col, out);
          if constexpr (kResidual) {
            Pack<T, kPack> sum;
#pragma unroll
            for (int j = 0; j < kPack; ++j) sum.elem[j] = static_cast<T>(v[p][j]);
            store_pack<T, kPack>(a.sum + offset + col, sum);
          }
        }
      }
      if (lane == 0 && rank == 0) {
        if constexpr (kCentered) a.mean[row] = mean;
        a.rstd[row] = rstd;
      }
    }
    if (cluster_blocks > 1) row_engine::wait_for_cluster_readers();
  }
}

// Backward of a row held in registers: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with
// g = dy * weight (RMSNorm: no mean(g) term), plus the sum output's gradient; each thread adds
// dy * xhat and dy of its columns over its rows, and the block writes them as its partial row.
template <typename T, typename W, bool kCentered, bool kResidual, int kPack, int kColsPerThread,
          int kThreadsPerRow>
__global__ void __launch_bounds__(block_threads_for<kThreadsPerRow>(),
                                  row_engine::kMinBlocksPerSm<T>)
    backward_rows_kernel(BackwardArgs<T, W> a, int64_t slice_cols, int cluster_blocks) {
  using M = at::opmath_type<T>;
  constexpr int kBlockThreads = block_threads_for<kThreadsPerRow>();
  constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  constexpr int kPacks = kColsPerThread / kPack;
  constexpr int kCapacity = kThreadsPerRow * kColsPerThread;
  using State = GradSums<M>;
  __shared__ State scratch[kBlockThreads / kWarpSize];
  __shared__ State published;
  const int lane = threadIdx.x % kThreadsPerRow;
  const int row_in_block = threadIdx.x / kThreadsPerRow;
  const int rank = blockIdx.x % cluster_blocks;
  const int64_t slice_begin = rank * slice_cols;
  const int64_t slice_length = max(int64_t{0}, min(a.cols - slice_begin, slice_cols));
  const int64_t group = blockIdx.x / cluster_blocks;
  const int64_t groups = gridDim.x / cluster_blocks;
  const M inv_cols = M(1) / M(a.cols);
  M dweight[kPacks][kPack] = {};
  M dbias[kPacks][kPack] = {};
  for (int64_t first_row = group * kRowsPerBlock; first_row < a.rows;
       first_row += groups * kRowsPerBlock) {
    const bool row_valid = first_row + row_in_block < a.rows;
    const int64_t row = min(first_row + row_in_block, a.rows - 1);
    const int64_t offset = row * a.cols + slice_begin;
    const M mean = kCentered ? a.mean[row] : M(0);
    const M rstd = a.rstd[row];
    M xhat[kPacks][kPack];
    M dy[kPacks][kPack];
    State sums{M(0), M(0)};
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
      if (col < slice_length) {
        load_values<T, kPack>(xhat[p], a.x + offset + col);
        load_values<T, kPack>(dy[p], a.dy + offset + col);
        M w[kPack];
        load_parameter<kPack>(w, a.weight ? a.weight + slice_begin : nullptr, col, M(1));
#pragma unroll
        for (int j = 0; j < kPack; ++j) {
          xhat[p][j] = (xhat[p][j] - mean) * rstd;
          const M g = product(dy[p][j], w[j]);
          sums.g += g;
          sums.g_xhat += g * xhat[p][j];
        }
      } else {
#pragma unroll
        for (int j = 0; j < kPack; ++j) xhat[p][j] = dy[p][j] = M(0);
      }
    }
    sums = row_allreduce<kThreadsPerRow>(sums, AddGradSums(), scratch, &published, cluster_blocks);
    const M mean_g = kCentered ? sums.g * inv_cols : M(0);
    const M mean_g_xhat = sums.g_xhat * inv_cols;
    if (row_valid) {
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
        if (col < slice_length) {
          M w[kPack];
          load_parameter<kPack>(w, a.weight ? a.weight + slice_begin : nullptr, col, M(1));
          M extra[kPack];
          if constexpr (kResidual) {
            if (a.dsum != nullptr) {
              load_values<T, kPack>(extra, a.dsum + offset + col);
            } else {
#pragma unroll
              for (int j = 0; j < kPack; ++j) extra[j] = M(0);
            }
          }
          Pack<T, kPack> out;
#pragma unroll
          for (int j = 0; j < kPack; ++j) {
            M dx = rstd * (product(dy[p][j], w[j]) - mean_g - xhat[p][j] * mean_g_xhat);
            if constexpr (kResidual) dx += extra[j];
            out.elem[j] = static_cast<T>(dx);
            dweight[p][j] += dy[p][j] * xhat[p][j];
            dbias[p][j] += dy[p][j];
          }
          store_pack<T, kPack>(a.dx + offset + col, out);
        }
      }
    }
    if (cluster_blocks > 1) row_engine::wait_for_cluster_readers();
  }
  // The block's partial row: its rows' sums, added in a fixed order.
  const bool want_weight = a.partial_dweight != nullptr;
  const bool want_bias = a.partial_dbias != nullptr;
  if (!want_weight && !want_bias) return;
  if constexpr (kRowsPerBlock == 1) {
    // One row group: each thread writes its own columns of this cluster's partial row.
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
      if (col >= slice_length) continue;
      const int64_t at = group * a.cols + slice_begin + col;
#pragma unroll
      for (int j = 0; j < kPack; ++j) {
        if (want_weight) a.partial_dweight[at + j] = dweight[p][j];
        if (want_bias) a.partial_dbias[at + j] = dbias[p][j];
      }
    }
  } else {
    // Several row groups: they meet in shared memory, and column c's groups are added in order.
    __shared__ M staged[kRowsPerBlock][kCapacity];
    for (int pass = 0; pass < 2; ++pass) {
      M* partial = pass == 0 ? a.partial_dweight : a.partial_dbias;
      if (partial == nullptr) continue;
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
#pragma unroll
        for (int j = 0; j < kPack; ++j)
          staged[row_in_block][col + j] = pass == 0 ? dweight[p][j] : dbias[p][j];
      }
      __syncthreads();
      for (int col = threadIdx.x; col < kCapacity && col < a.cols; col += kBlockThreads) {
        M total = 0;
#pragma unroll
        for (int g = 0; g < kRowsPerBlock; ++g) total += staged[g][col];
        partial[group * a.cols + col] = total;
      }
      __syncthreads();
    }
  }
}

// ---- Rows too long for any cluster's registers: a block per row reads it twice. ----

constexpr int kLongRowThreads = 512;

template <typename T, typename W, bool kCentered, bool kResidual>
__global__ void __launch_bounds__(kLongRowThreads, row_engine::kMinBlocksPerSm<T>)
    forward_long_kernel(ForwardArgs<T, W> a) {
  using M = at::opmath_type<T>;
  using State = std::conditional_t<kCentered, Moments<M>, M>;
  using Combine = std::conditional_t<kCentered, MergeMoments, SumOp>;
  __shared__ State scratch[kLongRowThreads / kWarpSize];
  const Combine combine;
  const auto value_at = [&](int64_t i) {
    M value = static_cast<M>(a.x[i]);
    if constexpr (kResidual)
      value = static_cast<M>(static_cast<T>(value + static_cast<M>(a.residual[i])));
    return value;
  };
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const int64_t offset = row * a.cols;
    State state{};
    for (int64_t c = threadIdx.x; c < a.cols; c += kLongRowThreads) {
      const M value = value_at(offset + c);
      if constexpr (kCentered) {
        state = combine(state, State{M(1), value, M(0)});
      } else {
        state += value * value;
      }
    }
    state = block_allreduce_with<kLongRowThreads>(state, combine, State{}, scratch);
    M mean = 0;
    M variance;
    if constexpr (kCentered) {
      mean = state.mean;
      variance = state.m2 / M(a.cols);
    } else {
      variance = state / M(a.cols);
    }
    const M rstd = M(1) / sqrt(variance + a.eps);
    for (int64_t c = threadIdx.x; c < a.cols; c += kLongRowThreads) {
      const M value = value_at(offset + c);
      const M w = a.weight ? static_cast<M>(a.weight[c]) : M(1);
      const M b = a.bias ? static_cast<M>(a.bias[c]) : M(0);
      a.y[offset + c] = static_cast<T>((value - mean) * rstd * w + b);
      if constexpr (kResidual) a.sum[offset + c] = static_cast<T>(value);
    }
    if (threadIdx.x == 0) {
      if constexpr (kCentered) a.mean[row] = mean;
      a.rstd[row] = rstd;
    }
  }
}

// The partial rows start at zero (the host clears them) and each block adds its rows into its
// own: no other block touches it, so no atomics.
template <typename T, typename W, bool kCentered, bool kResidual>
__global__ void __launch_bounds__(kLongRowThreads, row_engine::kMinBlocksPerSm<T>)
    backward_long_kernel(BackwardArgs<T, W> a) {
  using M = at::opmath_type<T>;
  __shared__ GradSums<M> scratch[kLongRowThreads / kWarpSize];
  const M inv_cols = M(1) / M(a.cols);
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const int64_t offset = row * a.cols;
    const M mean = kCentered ? a.mean[row] : M(0);
    const M rstd = a.rstd[row];
    GradSums<M> sums{M(0), M(0)};
    for (int64_t c = threadIdx.x; c < a.cols; c += kLongRowThreads) {
      const M xhat = (static_cast<M>(a.x[offset + c]) - mean) * rstd;
      const M g =
          product(static_cast<M>(a.dy[offset + c]), a.weight ? static_cast<M>(a.weight[c]) : M(1));
      sums.g += g;
      sums.g_xhat += g * xhat;
    }
    sums = block_allreduce_with<kLongRowThreads>(sums, AddGradSums(), GradSums<M>{}, scratch);
    const M mean_g = kCentered ? sums.g * inv_cols : M(0);
    const M mean_g_xhat = sums.g_xhat * inv_cols;
    for (int64_t c = threadIdx.x; c < a.cols; c += kLongRowThreads) {
      const M xhat = (static_cast<M>(a.x[offset + c]) - mean) * rstd;
      const M dy = static_cast<M>(a.dy[offset + c]);
      M dx = rstd * (product(dy, a.weight ? static_cast<M>(a.weight[c]) : M(1)) - mean_g -
                     xhat * mean_g_xhat);
      if constexpr (kResidual) {
        if (a.dsum != nullptr) dx += static_cast<M>(a.dsum[offset + c]);
      }
      a.dx[offset + c] = static_cast<T>(dx);
      const int64_t at = blockIdx.x * a.cols + c;
      if (a.partial_dweight) a.partial_dweight[at] += dy * xhat;
      if (a.partial_dbias) a.partial_dbias[at] += dy;
    }
  }
}

// ---- The second pass: out[c] = the sum of partial[p][c] over p, in order of p. ----

constexpr int kSumCols = 32;
constexpr int kSumLanes = 16;

template <typename W, typename Acc>
__global__ void __launch_bounds__(kSumCols* kSumLanes)
    sum_partials_kernel(W* __restrict__ out, const Acc* __restrict__ partial, int64_t partials,
                        int64_t cols) {
  __shared__ Acc totals[kSumLanes][kSumCols];
  const int64_t col = int64_t{blockIdx.x} * kSumCols + threadIdx.x;
  Acc total = 0;
  if (col < cols) {
    for (int64_t p = threadIdx.y; p < partials; p += kSumLanes) total += partial[p * cols + col];
  }
  totals[threadIdx.y][threadIdx.x] = total;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
#pragma unroll
    for (int lane = 1; lane < kSumLanes; ++lane) total += totals[lane][threadIdx.x];
    out[col] = static_cast<W>(total);
  }
}

template <typename W, typename Acc>
void sum_partials(W* out, const Acc* partial, int64_t partials, int64_t cols, cudaStream_t stream) {
  const int64_t blocks = ceil_div(cols, kSumCols);
  sum_partials_kernel<W, Acc>
      <<<static_cast<unsigned>(blocks), dim3(kSumCols, kSumLanes), 0, stream>>>(out, partial,
                                                                                partials, cols);
  OPGEN_CHECK_LAUNCH();
}

// ---- Host side: the plan of a call. ----

// Values a thread holds: 32 in the forward (x), 16 in the backward, which also holds dy and two
// float accumulators a value, and would spill at 32.
template <bool kBackward>
constexpr int kColsPerThreadMax =
    kBackward ? kRegisterRowColsPerThread / 2 : kRegisterRowColsPerThread;

// double runs one value a thread step on at most 128 threads a row: correct, not tuned.
template <typename T>
constexpr int kRowThreadsMax = std::is_same_v<T, double> ? 128 : kMaxRowThreads;

template <typename T, bool kBackward>
constexpr int64_t kRegisterCols = int64_t{kRowThreadsMax<T>} * kColsPerThreadMax<kBackward>;

struct Launch {
  int64_t blocks;
  int cluster_blocks;
  int64_t slice_cols;
  int block_threads;
};

// Launches `kernel` on a grid of launch.blocks blocks, clusters of launch.cluster_blocks.
template <typename Kernel, typename Args>
void launch_grid(Kernel kernel, const Launch& launch, cudaStream_t stream, const Args& args) {
  row_engine::SlicePlan plan{launch.cluster_blocks, launch.slice_cols, 0};
  row_engine::launch_slices(kernel, plan, launch.block_threads, launch.blocks, stream, args,
                            launch.slice_cols);
}

// Whether `kKernel` has cluster code (built for sm_90 or newer), asked once per device; the
// kernel is opted in to 16-block clusters on the way.
template <auto kKernel>
bool has_clusters() {
  static std::atomic<int> known[kMaxDevices] = {};  // 0 unknown, 1 no, 2 yes
  const int device = c10::cuda::current_device();
  int answer = device < kMaxDevices ? known[device].load(std::memory_order_relaxed) : 0;
  if (answer == 0) {
    cudaFuncAttributes attributes;
    C10_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kKernel));
    answer = attributes.ptxVersion >= 90 ? 2 : 1;
    if (answer == 2) {
      C10_CUDA_CHECK(
          cudaFuncSetAttribute(kKernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    }
    if (device < kMaxDevices) known[device].store(answer, std::memory_order_relaxed);
  }
  return answer == 2;
}

// The smallest cluster (2 to 16 blocks) whose register slices of `block_cols` hold a row of
// `cols`, if the kernel has cluster code and the GPU can schedule one; 0 if none.
template <auto kKernel>
int cluster_for(int64_t cols, int64_t block_cols, int block_threads) {
  if (cols > block_cols * kMaxClusterBlocks || !has_clusters<kKernel>()) return 0;
  int blocks = 2;
  while (block_cols * blocks < cols) blocks *= 2;
  const row_engine::SlicePlan plan{blocks, 0, 0};
  return row_engine::schedulable(kKernel, plan, block_threads) ? blocks : 0;
}

template <int N>
using IntConstant = std::integral_constant<int, N>;

// Calls f(kColsPerThread, kThreadsPerRow) for the smallest register-row kernel holding `cols`,
// as the row engine's launch_warp_rows sizes its kernels: capacities from two packs a thread,
// times 2 on the 16-byte path (4 on the one-value path, correct but not tuned), narrow rows
// sharing a warp, wider ones more values a thread up to kColsPerThreadMax, then more threads.
template <typename T, bool kBackward, int kPack, int kCapacity = std::max(2 * kPack, 4), typename F>
void with_register_shape(int64_t cols, F&& f) {
  constexpr int64_t kMax = kRegisterCols<T, kBackward>;
  static_assert(kMax % kCapacity == 0, "capacities grow to the maximum");
  if constexpr (kCapacity < kMax) {
    if (cols > kCapacity) {
      constexpr int kNext = static_cast<int>(
          std::min<int64_t>(kMax, int64_t{row_engine::kCapacityStep<kPack>} * kCapacity));
      with_register_shape<T, kBackward, kPack, kNext>(cols, std::forward<F>(f));
      return;
    }
  }
  constexpr int kColsPerThread =
      std::clamp(kCapacity / kWarpSize, 2 * kPack, kColsPerThreadMax<kBackward>);
  f(IntConstant<kColsPerThread>(), IntConstant<kCapacity / kColsPerThread>());
}

// y = norm(x) * weight + bias for every row, and the rows' statistics; see ForwardArgs.
template <typename T, typename W, bool kCentered, bool kResidual, int kPack>
void launch_forward_with(const ForwardArgs<T, W>& a, cudaStream_t stream) {
  if (a.cols <= kRegisterCols<T, false>) {
    with_register_shape<T, false, kPack>(a.cols, [&](auto cols_per_thread, auto threads_per_row) {
      constexpr int kThreadsPerRow = decltype(threads_per_row)::value;
      constexpr auto kernel = forward_rows_kernel<T, W, kCentered, kResidual, kPack,
                                                  decltype(cols_per_thread)::value, kThreadsPerRow>;
      constexpr int kBlockThreads = block_threads_for<kThreadsPerRow>();
      // A block for every few rows, as the row engine's register rows (a new block's loads
      // start as soon as a slot frees), up to CUDA's grid limit (the kernel loops past it).
      const int64_t blocks = std::clamp<int64_t>(ceil_div(a.rows, kBlockThreads / kThreadsPerRow),
                                                 1, std::numeric_limits<int>::max());
      launch_grid(kernel, Launch{blocks, 1, a.cols, kBlockThreads}, stream, a);
    });
    return;
  }
  if constexpr (kPack > 1) {
    // Up to 16 blocks' registers in a cluster on sm_90: the row is read from DRAM once.
    constexpr int kColsPerThread = kColsPerThreadMax<false>;
    constexpr auto kernel =
        forward_rows_kernel<T, W, kCentered, kResidual, kPack, kColsPerThread, kMaxRowThreads>;
    const int cluster = cluster_for<kernel>(a.cols, kRegisterCols<T, false>, kMaxRowThreads);
    if (cluster > 0) {
      const int64_t slice_cols = ceil_div(ceil_div(a.cols, cluster), kPack) * kPack;
      const int64_t clusters = std::min<int64_t>(a.rows, std::numeric_limits<int>::max() / cluster);
      launch_grid(kernel, Launch{clusters * cluster, cluster, slice_cols, kMaxRowThreads}, stream,
                  a);
      return;
    }
  }
  // Longer still: a block per row reads it twice, the second time from L2 where it still is.
  constexpr auto kernel = forward_long_kernel<T, W, kCentered, kResidual>;
  const int64_t blocks = row_engine::resident_blocks<kernel>(kLongRowThreads, a.rows);
  kernel<<<static_cast<unsigned>(blocks), kLongRowThreads, 0, stream>>>(a);
  OPGEN_CHECK_LAUNCH();
}

template <typename T>
constexpr int kPackOf = std::is_same_v<T, double> ? 1 : pack_size<T>();

template <typename T, typename W>
bool packs_fit(const T* const* tensors, int count, const W* const* params, int params_count,
               int64_t cols) {
  constexpr int kPack = kPackOf<T>;
  if (kPack == 1 || cols % kPack != 0) return false;
  for (int i = 0; i < count; ++i)
    if (tensors[i] != nullptr && !is_aligned(tensors[i], kVectorBytes)) return false;
  for (int i = 0; i < params_count; ++i)
    if (params[i] != nullptr && !is_aligned(params[i], sizeof(W) * kPack)) return false;
  return true;
}

// W, the parameters' type: T, or M where a parameter comes in float32 beside half-precision x.
template <typename T, typename W, bool kCentered, bool kResidual>
void launch_forward(const ForwardArgs<T, W>& a, cudaStream_t stream) {
  if (a.rows == 0 || a.cols == 0) return;
  constexpr int kPack = kPackOf<T>;
  const T* tensors[] = {a.y, a.sum, a.x, a.residual};
  const W* params[] = {a.weight, a.bias};
  if constexpr (kPack > 1) {
    if (packs_fit<T, W>(tensors, 4, params, 2, a.cols))
      return launch_forward_with<T, W, kCentered, kResidual, kPack>(a, stream);
  }
  launch_forward_with<T, W, kCentered, kResidual, 1>(a, stream);
}

// Where the backward's per-column sums go: `partials` rows of `cols` values (M) for the weight
// and the bias gradients, made by the caller (it owns the allocator). Null where not wanted.
template <typename M>
struct Partials {
  M* dweight;
  M* dbias;
};

template <typename T, typename W, bool kCentered, bool kResidual, int kPack, typename MakePartials>
int64_t launch_backward_with(BackwardArgs<T, W> a, cudaStream_t stream,
                             MakePartials make_partials) {
  using M = at::opmath_type<T>;
  if (a.cols <= kRegisterCols<T, true>) {
    int64_t partials = 0;
    with_register_shape<T, true, kPack>(a.cols, [&](auto cols_per_thread, auto threads_per_row) {
      constexpr int kThreadsPerRow = decltype(threads_per_row)::value;
      constexpr auto kernel =
          backward_rows_kernel<T, W, kCentered, kResidual, kPack, decltype(cols_per_thread)::value,
                               kThreadsPerRow>;
      constexpr int kBlockThreads = block_threads_for<kThreadsPerRow>();
      // As many blocks as the GPU holds at once, each looping over rows: each writes one partial
      // row of the gradients, so their number bounds the second pass's work.
      partials = row_engine::resident_blocks<kernel>(
          kBlockThreads, ceil_div(a.rows, kBlockThreads / kThreadsPerRow));
      const Partials<M> made = make_partials(partials, false);
      a.partial_dweight = made.dweight;
      a.partial_dbias = made.dbias;
      launch_grid(kernel, Launch{partials, 1, a.cols, kBlockThreads}, stream, a);
    });
    return partials;
  }
  if constexpr (kPack > 1) {
    constexpr int kColsPerThread = kColsPerThreadMax<true>;
    constexpr auto kernel =
        backward_rows_kernel<T, W, kCentered, kResidual, kPack, kColsPerThread, kMaxRowThreads>;
    const int cluster = cluster_for<kernel>(a.cols, kRegisterCols<T, true>, kMaxRowThreads);
    if (cluster > 0) {
      const int64_t slice_cols = ceil_div(ceil_div(a.cols, cluster), kPack) * kPack;
      // Clusters the GPU holds at once, each looping over rows.
      const int64_t sms = multiprocessor_count();
      const int64_t partials = std::clamp<int64_t>(
          sms * blocks_per_multiprocessor<kernel>(kMaxRowThreads) / cluster, 1, a.rows);
      const Partials<M> made = make_partials(partials, false);
      a.partial_dweight = made.dweight;
      a.partial_dbias = made.dbias;
      launch_grid(kernel, Launch{partials * cluster, cluster, slice_cols, kMaxRowThreads}, stream,
                  a);
      return partials;
    }
  }
  constexpr auto kernel = backward_long_kernel<T, W, kCentered, kResidual>;
  const int64_t partials = row_engine::resident_blocks<kernel>(kLongRowThreads, a.rows);
  const Partials<M> made = make_partials(partials, true);  // zeroed: the kernel adds into them
  a.partial_dweight = made.dweight;
  a.partial_dbias = made.dbias;
  kernel<<<static_cast<unsigned>(partials), kLongRowThreads, 0, stream>>>(a);
  OPGEN_CHECK_LAUNCH();
  return partials;
}

// dx for every row, and the weight and bias gradients' partial rows; returns how many partial
// rows it wrote (make_partials(count, zeroed) makes them), for sum_partials to add.
template <typename T, typename W, bool kCentered, bool kResidual, typename MakePartials>
int64_t launch_backward(const BackwardArgs<T, W>& a, cudaStream_t stream,
                        MakePartials make_partials) {
  if (a.rows == 0 || a.cols == 0) return 0;
  constexpr int kPack = kPackOf<T>;
  const T* tensors[] = {a.dx, a.dy, a.x, a.dsum};
  const W* params[] = {a.weight};
  if constexpr (kPack > 1) {
    if (packs_fit<T, W>(tensors, 4, params, 1, a.cols))
      return launch_backward_with<T, W, kCentered, kResidual, kPack>(a, stream, make_partials);
  }
  return launch_backward_with<T, W, kCentered, kResidual, 1>(a, stream, make_partials);
}

}  // namespace norm
}  // namespace opgen
