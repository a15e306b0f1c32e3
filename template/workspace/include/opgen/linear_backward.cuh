// The first step of the linear layout's backward on CUDA, in one pass over the output's gradient:
// the gradient at the pre-activation (the activation's derivative times the output's gradient),
// and with it the bias gradient, that gradient summed over rows. Eager PyTorch reads the
// pre-activation's gradient a second time for that sum (and cuBLASLt's bias-gradient epilogue
// ties it to one GEMM's algorithm); here it is added while the values are in registers.
//
// The sum is deterministic (no float atomics): each block adds its rows of its columns in float
// and writes one partial row, and reduce.cuh's sum_partials adds the partial rows in a fixed order
// (where one chunk of rows covers them all, the kernel writes that row as the sum itself).
// The bias gradient sums the pre-activation gradient as rounded to the tensors' dtype, the values
// the weight-gradient GEMM reads. 16-byte packs only: activation_backward_with_bias returns false
// where the layout does not allow them, and the caller takes ATen's path (opgen/linear.h).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/cuda/CUDAException.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "opgen/activations.cuh"
#include "opgen/launch.cuh"
#include "opgen/linear.h"
#include "opgen/reduce.cuh"
#include "opgen/row_engine.cuh"
#include "opgen/vec.cuh"

namespace opgen::linear {

// A block is kColumnThreads x kRowLanes threads: a warp across kColumnThreads packs of a row (512
// contiguous bytes), kRowLanes rows at a time; blockIdx.y picks a chunk of rows. Each thread
// issues the loads of kRowsInFlight of its rows (2 packs each: the gradient and the saved tensor)
// before any arithmetic, so 128 bytes a thread are in flight whatever the compiler makes of the
// loop: a pass that streams 3 tensors through the SMs needs that many bytes in flight to reach
// the memory's bandwidth (the loop of one row a step, before, reached 2.5 TB/s on an H200 where
// ATen's gelu_backward reached 3.3).
constexpr int kColumnThreads = 32;
constexpr int kRowLanes = 8;
constexpr int kRowsInFlight = 4;

// Act: an activation of opgen/activations.cuh; `saved` is what the forward kept for the
// backward, the pre-activation (GELU) or the output (ReLU).
template <typename T, typename Act>
__global__ void __launch_bounds__(kColumnThreads* kRowLanes)
    activation_backward_kernel(const T* __restrict__ grad, const T* __restrict__ saved,
                               T* __restrict__ grad_pre, float* __restrict__ partial,
                               T* __restrict__ bias_total, int64_t rows, int64_t cols,
                               int64_t rows_per_chunk) {
  constexpr int kPack = pack_size<T>();
  constexpr int kBlockCols = kColumnThreads * kPack;
  constexpr int kRowStep = kRowLanes * kRowsInFlight;
  __shared__ float lane_sums[kRowLanes][kBlockCols];
  const int64_t col = (int64_t{blockIdx.x} * kColumnThreads + threadIdx.x) * kPack;
  const int64_t first = int64_t{blockIdx.y} * rows_per_chunk;
  const int64_t last = std::min(rows, first + rows_per_chunk);
  float sums[kPack] = {};
  if (col < cols) {
    for (int64_t base = first + threadIdx.y; base < last; base += kRowStep) {
      Pack<T, kPack> g[kRowsInFlight], s[kRowsInFlight];
#pragma unroll
      for (int i = 0; i < kRowsInFlight; ++i) {
        const int64_t row = base + int64_t{i} * kRowLanes;
        if (row < last) {
          g[i] = load_pack<T, kPack>(grad + row * cols + col);
          s[i] = load_pack<T, kPack>(saved + row * cols + col);
        }
      }
#pragma unroll
      for (int i = 0; i < kRowsInFlight; ++i) {
        const int64_t row = base + int64_t{i} * kRowLanes;
        if (row < last) {
          Pack<T, kPack> result;
#pragma unroll
          for (int j = 0; j < kPack; ++j) {
            result.elem[j] =
                static_cast<T>(Act::backward(widen<float>(g[i], j), widen<float>(s[i], j)));
            sums[j] += static_cast<float>(result.elem[j]);
          }
          store_pack_global<T, kPack>(grad_pre + row * cols + col, result);
        }
      }
    }
  }
  // No bias gradient asked for (uniform over the block).
  if (partial == nullptr && bias_total == nullptr) return;
#pragma unroll
  for (int j = 0; j < kPack; ++j) lane_sums[threadIdx.y][threadIdx.x * kPack + j] = sums[j];
  __syncthreads();
  // The block's partial row: column c's lanes added in lane order.
  for (int c = threadIdx.y * kColumnThreads + threadIdx.x; c < kBlockCols;
       c += kColumnThreads * kRowLanes) {
    const int64_t column = int64_t{blockIdx.x} * kBlockCols + c;
    if (column >= cols) break;
    float total = 0.0f;
#pragma unroll
    for (int lane = 0; lane < kRowLanes; ++lane) total += lane_sums[lane][c];
    if (bias_total != nullptr) {
      bias_total[column] = static_cast<T>(total);  // one chunk of rows: its partial row is the sum
    } else {
      partial[int64_t{blockIdx.y} * cols + column] = total;
    }
  }
}

template <typename T, typename Act>
void launch_activation_backward(const at::Tensor& grad, const at::Tensor& saved,
                                at::Tensor& grad_pre, at::Tensor* grad_bias, cudaStream_t stream) {
  constexpr int kPack = pack_size<T>();
  const int64_t rows = grad.size(0), cols = grad.size(1);
  const int64_t column_blocks = row_engine::ceil_div(cols, int64_t{kColumnThreads} * kPack);
  // About kWaves waves of resident blocks, never more (a last wave of a few blocks would cost as
  // long as a full one), each over at least kMinChunkRows rows (a block's partial row is the bias
  // sum's only extra traffic).
  constexpr int64_t kWaves = 4;
  constexpr int64_t kMinChunkRows = 4 * kRowLanes;
  const int64_t resident =
      int64_t{multiprocessor_count()} *
      blocks_per_multiprocessor<activation_backward_kernel<T, Act>>(kColumnThreads * kRowLanes);
  const int64_t most_chunks = std::min<int64_t>(row_engine::ceil_div(rows, kMinChunkRows), 65535);
  const int64_t chunks_wanted =
      std::clamp<int64_t>(kWaves * resident / column_blocks, 1, most_chunks);
  const int64_t rows_per_chunk = row_engine::ceil_div(rows, chunks_wanted);
  const int64_t chunks = row_engine::ceil_div(rows, rows_per_chunk);
  // One chunk (a small batch): the kernel writes the bias gradient itself, the same float sum
  // rounded once, with no partial rows to allocate and no second launch (a small layer's step is
  // host-bound: each launch and allocation is time).
  const bool partials = grad_bias != nullptr && chunks > 1;
  at::Tensor partial;
  if (partials) partial = at::empty({chunks, cols}, grad.options().dtype(at::kFloat));
  const dim3 grid(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks));
  activation_backward_kernel<T, Act><<<grid, dim3(kColumnThreads, kRowLanes), 0, stream>>>(
      grad.const_data_ptr<T>(), saved.const_data_ptr<T>(), grad_pre.mutable_data_ptr<T>(),
      partials ? partial.mutable_data_ptr<float>() : nullptr,
      grad_bias != nullptr && !partials ? grad_bias->mutable_data_ptr<T>() : nullptr, rows, cols,
      rows_per_chunk);
  OPGEN_CHECK_LAUNCH();
  if (partials) {
    sum_partials<T, float>(grad_bias->mutable_data_ptr<T>(), partial.const_data_ptr<float>(),
                           chunks, cols, stream);
  }
}

// grad_pre (M x N) = the activation's derivative at `saved` (M x N) times `grad` (M x N), and
// where `grad_bias` is given, grad_pre summed over rows into it. false, with nothing written:
// the activation has no derivative here (identity, formulas), or the dtype or layout is not one
// of 16-byte packs (float64, N not a whole number of packs, misaligned, or empty).
inline bool activation_backward_with_bias(Activation activation, const at::Tensor& grad,
                                          const at::Tensor& saved, at::Tensor& grad_pre,
                                          at::Tensor* grad_bias, cudaStream_t stream) {
  if (activation != Activation::kRelu && activation != Activation::kGelu &&
      activation != Activation::kGeluTanh)
    return false;
  const at::ScalarType dtype = grad.scalar_type();
  if (dtype != at::kHalf && dtype != at::kBFloat16 && dtype != at::kFloat) return false;
  const int64_t pack = kVectorBytes / static_cast<int64_t>(c10::elementSize(dtype));
  if (grad.dim() != 2 || grad.numel() == 0 || grad.size(1) % pack != 0 || !grad.is_contiguous() ||
      !saved.is_contiguous() || !grad_pre.is_contiguous() || saved.sizes() != grad.sizes() ||
      grad_pre.sizes() != grad.sizes() || saved.scalar_type() != dtype)
    return false;
  for (const at::Tensor* t : {&grad, &saved, static_cast<const at::Tensor*>(&grad_pre)}) {
    if (!is_aligned(t->const_data_ptr(), kVectorBytes)) return false;
  }
  const auto launch = [&](auto type_tag) {
    using T = decltype(type_tag);
    switch (activation) {
      case Activation::kRelu:
        launch_activation_backward<T, activations::Relu>(grad, saved, grad_pre, grad_bias, stream);
        break;
      case Activation::kGelu:
        launch_activation_backward<T, activations::Gelu>(grad, saved, grad_pre, grad_bias, stream);
        break;
      default:
        launch_activation_backward<T, activations::GeluTanh>(grad, saved, grad_pre, grad_bias,
                                                             stream);
    }
  };
  if (dtype == at::kHalf) {
    launch(c10::Half());
  } else if (dtype == at::kBFloat16) {
    launch(c10::BFloat16());
  } else {
    launch(float());
  }
  return true;
}

}  // namespace opgen::linear
