// Warp and block all-reductions (butterfly shuffles (xor) leave the result in every lane, so no
// broadcast step is needed after the reduction), and the deterministic sum of partial rows that
// parallel column reductions finish with.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "opgen/fast_math.h"
#include "opgen/launch.cuh"

namespace opgen {

constexpr int kWarpSize = 32;

// A combine functor for the reductions below, for float or double.
struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};

// fmax: a NaN loses to any number, so a row's max ignores its NaNs; a caller that must report
// them sees them elsewhere (softmax's sum of exps does).
struct MaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return fmax(a, b);
  }
};

// The reductions take any reduction state (a float, a double, a (max, sum) pair) and a functor
// `combine(a, b)`.

// __shfl_xor_sync for any trivially copyable value, one 32-bit word at a time.
template <typename T>
__device__ __forceinline__ T shfl_xor_any(const T& value, int lane_mask, int width = kWarpSize) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % sizeof(unsigned) == 0,
                "shfl_xor_any moves whole 32-bit words of a trivially copyable value");
  constexpr int kWords = sizeof(T) / sizeof(unsigned);
  unsigned words[kWords];
  memcpy(words, &value, sizeof(T));
#pragma unroll
  for (int w = 0; w < kWords; ++w)
    words[w] = __shfl_xor_sync(0xffffffffu, words[w], lane_mask, width);
  T result;
  memcpy(&result, words, sizeof(T));
  return result;
}

// Reduces across groups of kWidth consecutive lanes; every lane of a group gets the result.
// All 32 lanes must call it (lanes without data pass the combine's identity).
template <int kWidth = kWarpSize, typename T, typename Combine>
__device__ __forceinline__ T warp_allreduce_with(T value, Combine combine) {
  static_assert(kWidth > 0 && kWidth <= kWarpSize && (kWidth & (kWidth - 1)) == 0,
                "kWidth must be a power of two no larger than a warp");
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) {
    value = combine(value, shfl_xor_any(value, offset, kWidth));
  }
  return value;
}

constexpr int ceil_power_of_two(int n) {
  int power = 1;
  while (power < n) power *= 2;
  return power;
}

// Every thread of each group of kGroupThreads consecutive threads gets its group's result: lanes
// of a warp (shuffles only), or whole warps, which meet once in shared memory. Groups of warps
// tile the block, so all its threads must call it. `scratch` needs one T a warp of the block;
// `identity` fills the shuffle lanes past a group's last warp (a block of 3 warps). The trailing
// barrier lets the caller reuse `scratch` at once.
template <int kGroupThreads, typename T, typename Combine>
__device__ __forceinline__ T group_allreduce_with(T value, Combine combine, T identity,
                                                  T* scratch) {
  if constexpr (kGroupThreads <= kWarpSize) {
    (void)identity;
    (void)scratch;
    return warp_allreduce_with<kGroupThreads>(value, combine);
  } else {
    static_assert(kGroupThreads % kWarpSize == 0 && kGroupThreads <= 1024,
                  "a group of warps is a multiple of 32 threads, at most 1024");
    constexpr int kWarps = kGroupThreads / kWarpSize;
    constexpr int kWidth = ceil_power_of_two(kWarps);
    const int lane = threadIdx.x % kWarpSize;
    const int warp = threadIdx.x / kWarpSize;
    value = warp_allreduce_with(value, combine);
    if (lane == 0) scratch[warp] = value;
    __syncthreads();
    // Each kWidth lanes read the group's warps in the same order, so every lane (every warp of
    // the group) gets the same bits.
    const int part = lane % kWidth;
    value = part < kWarps ? scratch[warp / kWarps * kWarps + part] : identity;
    value = warp_allreduce_with<kWidth>(value, combine);
    __syncthreads();
    return value;
  }
}

// All threads of the block get the result: group_allreduce_with over the whole block.
template <int kBlockSize, typename T, typename Combine>
__device__ __forceinline__ T block_allreduce_with(T value, Combine combine, T identity,
                                                  T* scratch) {
  return group_allreduce_with<kBlockSize>(value, combine, identity, scratch);
}

// log2(e), for exp(x) as exp2(x * kLog2e) (exp2_ftz: opgen/fast_math.h).
template <typename T>
constexpr T kLog2e = T(1.4426950408889634);

// Online softmax normalizer (Milakov & Gimelshein, "Online normalizer calculation for softmax",
// 2018): the max of some values and the sum of exp(value - max). Two of them merge without
// revisiting the values, so a row can be reduced in pieces, in any order, in one read.
template <typename T>
struct MaxExpSum {
  T max;
  T sum;
};

struct MergeMaxExpSum {
  template <typename T>
  __device__ __forceinline__ MaxExpSum<T> operator()(const MaxExpSum<T>& a,
                                                     const MaxExpSum<T>& b) const {
    // Values, not references to a or b: selecting a reference would put both in local memory.
    const bool b_higher = a.max < b.max;
    const T hi_max = b_higher ? b.max : a.max;
    const T lo_max = b_higher ? a.max : b.max;
    const T hi_sum = b_higher ? b.sum : a.sum;
    const T lo_sum = b_higher ? a.sum : b.sum;
    // Only the part with the smaller max is rescaled; equal maxima need none (and both -inf
    // would make exp(-inf - -inf) a NaN). The fast exp2's error grows with the gap between the
    // maxima, but the part it scales shrinks faster, as e^-gap.
    const T lo_scaled =
        lo_max == hi_max ? lo_sum : lo_sum * exp2_ftz((lo_max - hi_max) * kLog2e<T>);
    return {hi_max, hi_sum + lo_scaled};
  }
};

// ---- Deterministic column sums of partial rows ----
// Kernels that reduce over rows in parallel (the norms' weight and bias gradients, the linear
// layout's bias gradient) write one partial row per block, in Acc, and this second pass adds
// them: out[c] = the sum of partial[p][c] over p, in an order fixed by the number of partial
// rows, so the same inputs give the same bits (no float atomics). A block's threads are `lanes`
// lanes of column threads, each column thread taking kVec adjacent columns (one 16-byte load
// where the rows allow it); lane l adds partial rows l, l + lanes, ... in order, then lane 0 adds
// the lanes' totals in lane order. The lanes (a power of two, up to 64) grow with the partial
// rows, about 8 loads a lane at the least: a norm's short rows leave hundreds of partial rows of
// few columns, its long rows a dozen of 2^18 columns. (Fixed 16 lanes of 32 columns ran rows of
// 1024 on 32 blocks, and left 14 of the 16 lanes idle at rows of 262144.) One launch adds up to
// kSumPartialsMaxTargets gradients' partial rows (blockIdx.y), each its own width and row stride:
// a norm's weight and bias, an MLP's every weight and bias gradient (their columns within each
// block's one partial row).

constexpr int kSumPartialsThreads = 256;
constexpr int kSumPartialsMaxLanes = 64;
constexpr int kSumPartialsMaxTargets = 16;

template <typename W, typename Acc>
struct PartialRows {
  W* out;              // cols values
  const Acc* partial;  // partials rows `stride` apart, cols each; may be null where partials is 0
  int64_t cols;
  int64_t stride;  // >= cols
};

template <typename W, typename Acc>
struct PartialTargets {
  PartialRows<W, Acc> target[kSumPartialsMaxTargets];
};

template <typename Acc, int kVec>
struct alignas(sizeof(Acc) * kVec) AccVec {
  Acc value[kVec];
};

template <typename W, typename Acc, int kVec>
__global__ void __launch_bounds__(kSumPartialsThreads)
    sum_partials_kernel(const PartialTargets<W, Acc> targets, int64_t partials, int lanes) {
  __shared__ Acc totals[kSumPartialsThreads * kVec];
  const PartialRows<W, Acc> rows = targets.target[blockIdx.y];
  const int64_t cols = rows.cols;
  const int col_threads = kSumPartialsThreads / lanes;
  const int lane = threadIdx.x / col_threads;
  const int col_thread = threadIdx.x % col_threads;
  const int64_t col = (int64_t{blockIdx.x} * col_threads + col_thread) * kVec;
  Acc total[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) total[i] = Acc(0);
  if (col < cols) {
    // Unrolled so that several loads are in flight; the adds keep their order.
#pragma unroll 4
    for (int64_t p = lane; p < partials; p += lanes) {
      const auto loaded =
          *reinterpret_cast<const AccVec<Acc, kVec>*>(rows.partial + p * rows.stride + col);
#pragma unroll
      for (int i = 0; i < kVec; ++i) total[i] += loaded.value[i];
    }
  }
#pragma unroll
  for (int i = 0; i < kVec; ++i) totals[i * kSumPartialsThreads + threadIdx.x] = total[i];
  __syncthreads();
  if (lane == 0 && col < cols) {
    for (int l = 1; l < lanes; ++l) {
#pragma unroll
      for (int i = 0; i < kVec; ++i)
        total[i] += totals[i * kSumPartialsThreads + l * col_threads + col_thread];
    }
    // kVec > 1 only where every cols is a multiple of it: every column here is in the row.
#pragma unroll
    for (int i = 0; i < kVec; ++i) rows.out[col + i] = static_cast<W>(total[i]);
  }
}

// Each of `count` (at most kSumPartialsMaxTargets) gradients' out = its partial rows summed over
// rows, on `stream`.
template <typename W, typename Acc>
void sum_partials_of(const PartialRows<W, Acc>* sums, int count, int64_t partials,
                     cudaStream_t stream) {
  TORCH_CHECK(count <= kSumPartialsMaxTargets, "sum_partials: at most ", kSumPartialsMaxTargets,
              " targets a launch, got ", count);
  int64_t cols = 0;  // the widest target's
  PartialTargets<W, Acc> targets{};
  for (int i = 0; i < count; ++i) {
    targets.target[i] = sums[i];
    cols = std::max(cols, sums[i].cols);
  }
  if (cols == 0 || count == 0) return;
  int lanes = 1;
  while (lanes < kSumPartialsMaxLanes && int64_t{lanes} * 8 <= partials) lanes *= 2;
  constexpr int kVec = 16 / sizeof(Acc) > 0 ? static_cast<int>(16 / sizeof(Acc)) : 1;
  bool vectors = true;
  for (int i = 0; i < count; ++i) {
    vectors = vectors && sums[i].cols % kVec == 0 && sums[i].stride % kVec == 0 &&
              reinterpret_cast<uintptr_t>(sums[i].partial) % 16 == 0;
  }
  const int64_t col_threads = kSumPartialsThreads / lanes;
  const auto launch = [&](auto kernel, int vec) {
    const int64_t blocks = (cols + col_threads * vec - 1) / (col_threads * vec);
    kernel<<<dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(count)), kSumPartialsThreads,
             0, stream>>>(targets, partials, lanes);
    OPGEN_CHECK_LAUNCH();
  };
  if (vectors) {
    launch(sum_partials_kernel<W, Acc, kVec>, kVec);
  } else {
    launch(sum_partials_kernel<W, Acc, 1>, 1);
  }
}

// out (cols values of W) = the partial rows (partials x cols, row-major, Acc) summed over rows,
// on `stream`. partial may be null where partials is 0 (out is then zeros).
template <typename W, typename Acc>
void sum_partials(W* out, const Acc* partial, int64_t partials, int64_t cols, cudaStream_t stream) {
  const PartialRows<W, Acc> sums[] = {{out, partial, cols, cols}};
  sum_partials_of(sums, 1, partials, stream);
}

}  // namespace opgen
