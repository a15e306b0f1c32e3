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
// writes one partial row, and a second small kernel (reduce.cuh's sum_partials) adds the partial
// rows in a fixed order. Same inputs, same bits.
//
// Paths by row length, as in the row engine: rows sit in the registers of a few lanes, a warp, or
// up to 16 warps (16-byte path: up to 16384 float32 or 32768 bfloat16 values forward, half that
// with a residual; 4096 or 8192 backward, which holds x, dy, the next row's x and dy, and the two
// gradient accumulators); longer rows are split over a cluster of blocks on sm_90 and read from
// DRAM once: forward up to 16 times a block's row (a residual's clusters hold as much of each input
// as a plain row's, see kClusterResidualPacks; where 16 blocks would be needed, 8 blocks of 1024
// threads, see kWideClusterThreads), backward up to 32 times (past 8 blocks, up to 16 of 1024
// threads, see kWideBackwardClusterThreads; float32 64 times, see kDeepBackwardClusters). Anything
// longer reads the row twice, a block per row (backward: a cluster per row, each block a slice of
// its columns). Values are held in registers as loaded (Raw packs) and widened where used, so a
// thread keeps 128 bytes of loads in flight forward; the backward's blocks loop over rows and load
// each next row ahead.
#pragma once

#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <limits>
#include <mutex>
#include <type_traits>
#include <unordered_map>
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
    // Halves of a row (every merge of the butterfly over whole packs) need no division: b / 2b
    // is 0.5 exactly.
    const M b_share = a.count == b.count ? M(0.5) : b.count / count;
    return {count, a.mean + delta * b_share, a.m2 + b.m2 + delta * delta * a.count * b_share};
  }
};

// The Moments of pieces of equal size, as their mean and variance (m2 / count): two of them
// merge with no count and no division, (a.mean + b.mean) / 2 and (a.variance + b.variance) / 2
// + ((b.mean - a.mean) / 2)^2, which is MergeMoments for equal counts. A row whose threads all
// hold whole packs, in every block of its cluster, reduces this way: its butterflies only ever
// merge halves. Bit for bit symmetric, so every lane gets the same bits. The Moments merge was
// most of what LayerNorm's forward over clusters lost to RMSNorm's one sum, in the cluster stage
// above all, whose lanes past the blocks merged an empty state (a division each); on an H200
// (docs/benchmarks/layernorm, 2026-11-29d; % of copy): float32 rows of 32768 78.9 -> 86.7,
// 262144 53.9 -> 61.0; bfloat16 rows of 131072 72.4 -> 78.7 (RMSNorm's 89, 69, 84).
template <typename M>
struct EqualMoments {
  M mean;
  M variance;
};

struct MergeEqualMoments {
  // No identity (a piece of no values is no half), but a piece merged with itself is itself:
  // cluster_allreduce (row_engine.cuh) fills the lanes past a cluster's blocks with the blocks.
  static constexpr bool kIdempotent = true;
  template <typename M>
  __device__ __forceinline__ EqualMoments<M> operator()(const EqualMoments<M>& a,
                                                        const EqualMoments<M>& b) const {
    const M half_delta = (b.mean - a.mean) * M(0.5);
    return {(a.mean + b.mean) * M(0.5),
            (a.variance + b.variance) * M(0.5) + half_delta * half_delta};
  }
};

// Whether rows whose threads all hold whole packs (in every block of the cluster) merge their
// Moments as EqualMoments (false: MergeMoments throughout, as before 2026-11-29d).
constexpr bool kEqualCountMoments = true;

// A reduction as cluster_allreduce (row_engine.cuh) takes it: a State, its Combine and identity.
template <typename State, typename CombineOp>
struct Reduction {
  using Combine = CombineOp;
  static constexpr int kInputs = 1;
  __device__ static State identity() { return State{}; }
};
static_assert(row_engine::Idempotent<Reduction<EqualMoments<float>, MergeEqualMoments>>::value,
              "cluster_allreduce must not merge EqualMoments with an identity");

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

// How a kernel's blocks share each row's reductions over a cluster: by pushes onto mbarriers
// (row_engine::cluster_allreduce_pushed; true), or through cluster barriers, two a row
// (row_engine::cluster_allreduce; false). The backward loads its next row before it reduces the
// current one, and a barrier's release waited for those loads: with pushes its kernel on an H200
// (docs/benchmarks/layernorm, 2026-11-29f: a training step, 512 MiB inputs), us: LayerNorm
// float32 rows of 32768 531 -> 422, 65536 582 -> 436, 262144 856 -> 754; bfloat16 131072 778 ->
// 498; RMSNorm bfloat16 131072 586 -> 417; the residual forms 5-20% faster but add_rmsnorm float32
// rows of 131072-262144 (within 1%). The forward has no loads in flight at its reduction: pushes
// there went both ways (LayerNorm bfloat16 rows of 131072 326 -> 358 us, add_layernorm bfloat16
// 32768 589 -> 552), as in 2026-11-25d, so its blocks of 512 threads keep the barriers, two an SM,
// each one's loads in flight while the other waits. Its wide clusters (kWideClusterThreads) take
// the pushes: one block an SM, likely idled by a barrier's fence and wait (which also invalidates
// L1, CCTL.IVALL) with no other block to fill it. The forward, float32 rows of 262144, barriers
// -> pushes (2026-11-29h, three H200 calls): LayerNorm 428 -> 396, 425 -> 390, 419 -> 390 us;
// RMSNorm 379 -> 351, 378 -> 350, 377 -> 351; add_layernorm 675 -> 661, 682 -> 656.
// LayerNorm's narrow float32 clusters take the pushes too (kForwardClusterPushes<float, true>):
// its rows reduce twice (mean, then the centred squares), so it pays twice for each barrier's
// wait. The forward, barriers -> pushes, float32 rows of 32768 / 65536 / 131072 (2026-11-30, one
// H200 call, HEAD timed before and after): LayerNorm 295.0 -> 274.7 / 308.6 -> 280.6 / 312.4 ->
// 289.1 us, add_layernorm 550.2 -> 551.9 / 555.8 -> 556.2 / 575.8 -> 568.4. RMSNorm's one reduction
// gains at 32768 only and loses past it (RMSNorm 287.2 -> 275.9 / 295.2 -> 302.6 / 305.9 -> 313.5,
// add_rmsnorm 551.5 -> 548.5 / 558.4 -> 580.7 / 575.6 -> 593.2); bfloat16 rows lose with the pushes
// (2026-11-29j, LayerNorm 65536 305.9 -> 321.0, 131072 323.4 -> 344.6).
template <typename T, bool kCentered>
constexpr bool kForwardClusterPushes = sizeof(T) == 4 && kCentered;
constexpr bool kForwardWideClusterPushes = true;
constexpr bool kBackwardClusterPushes = true;

// What a block keeps in shared memory for its cluster's rows: the mailbox the pushes land in, or
// the slot cluster_allreduce publishes the block's State in.
struct PublishedState {
  alignas(8) uint32_t words[row_engine::kMailboxWords];
};
template <bool kClusterPushes>
using ClusterShared =
    std::conditional_t<kClusterPushes, row_engine::ClusterMailbox, PublishedState>;

// A block's side of its cluster's rows, made once a kernel by every thread: open() before the
// first row, end_row() after each row's stores, close() after the last, by every thread of every
// block (with one block, all do nothing).
template <bool kClusterPushes>
class ClusterRows {
 public:
  __device__ ClusterRows(ClusterShared<kClusterPushes>& box, int blocks)
      : box_(box), blocks_(blocks) {}

  __device__ int blocks() const { return blocks_; }

  __device__ void open() {
    if constexpr (kClusterPushes) {
      if (blocks_ > 1) row_engine::open_mailbox(box_);
    }
  }

  // The States of the cluster's blocks combined (every block gets the same bits).
  template <typename State, typename Combine>
  __device__ State allreduce(State value) {
    using Fn = Reduction<State, Combine>;
    if constexpr (kClusterPushes) {
      return row_engine::cluster_allreduce_pushed<Fn>(value, box_, blocks_, round_++);
    } else {
      static_assert(sizeof(State) <= sizeof(PublishedState) && alignof(State) <= 8);
      return row_engine::cluster_allreduce<Fn>(value, reinterpret_cast<State*>(box_.words),
                                               blocks_);
    }
  }

  // Barriers: the row's readers of this block's State are done before it publishes again.
  __device__ void end_row() const {
    if constexpr (!kClusterPushes) {
      if (blocks_ > 1) row_engine::wait_for_cluster_readers();
    }
  }

  __device__ void close() const {
    if constexpr (kClusterPushes) {
      if (blocks_ > 1) row_engine::close_mailbox();
    }
  }

 private:
  ClusterShared<kClusterPushes>& box_;
  int blocks_;
  uint32_t round_ = 0;
};

// Reduces `value` over a row's threads (and, with clusters, over its blocks); every thread of
// the row gets the same bits.
template <int kThreadsPerRow, typename State, typename Combine, typename Cluster>
__device__ __forceinline__ State row_allreduce(State value, Combine combine, State* scratch,
                                               Cluster& cluster) {
  value = group_allreduce_with<kThreadsPerRow>(value, combine, State{}, scratch);
  if (cluster.blocks() > 1) value = cluster.template allreduce<State, Combine>(value);
  return value;
}

// Packs of T held as loaded (a bfloat16 pack is 4 registers, not 8 floats) and widened where
// used: half the registers of widened values, so more threads an SM keep loads in flight. On an
// H200 the widened bfloat16 forward took 72 registers a thread at 32 values and reached 64-84%
// of copy at rows of 1024 to 8192, against 96-97% for float32 holding the same 8 packs.
//
// A 16-byte pack of 16-bit values is held as four 32-bit words, loaded, filled and stored as
// words: held as a Pack of 16-bit elements, nvcc 13 moved each element on its own wherever a
// pack was chosen or carried from one row to the next (1-2 PRMTs a value: ~210 a row in the
// bfloat16 backward, and the registers of the halves it re-paired).
template <typename T, int kPack>
struct alignas(sizeof(T) * kPack) Raw {
  static constexpr bool kWords = sizeof(T) == 2 && sizeof(T) * kPack == 16;
  struct Words {
    uint32_t word[4];
  };
  std::conditional_t<kWords, Words, Pack<T, kPack>> held;
};

// The pack at ptr where `valid`, else zeros (see load_words_or_zero).
template <typename T, int kPack>
__device__ __forceinline__ Raw<T, kPack> load_raw(const T* ptr, bool valid) {
  Raw<T, kPack> raw;
  if constexpr (Raw<T, kPack>::kWords) {
    load_words_or_zero(raw.held.word, ptr, valid);
  } else {
    raw.held = load_pack_or_zero<T, kPack>(ptr, valid);
  }
  return raw;
}

// Element j of a held pack as M. For bfloat16 the widening (a shift or a mask) is volatile
// assembly, so the compiler redoes it at each use instead of keeping every widened value live
// across the row's reduction, which doubled the registers the raw packs were meant to save
// (bfloat16 forward, 64 values a thread: 116 to 127 registers, 91 to 95 with it).
template <typename M, typename T, int kPack>
__device__ __forceinline__ M value_of(const Raw<T, kPack>& raw, int j) {
  if constexpr (Raw<T, kPack>::kWords) {
    const uint32_t pair = raw.held.word[j / 2];
    if constexpr (std::is_same_v<T, c10::BFloat16> && std::is_same_v<M, float>) {
      uint32_t bits;
#ifdef __CUDA_ARCH__
      if (j % 2 == 0) {
        asm volatile("shl.b32 %0, %1, 16;" : "=r"(bits) : "r"(pair));
      } else {
        asm volatile("and.b32 %0, %1, 0xffff0000;" : "=r"(bits) : "r"(pair));
      }
#else
      bits = j % 2 == 0 ? pair << 16 : pair & 0xffff0000u;
#endif
      return __uint_as_float(bits);
    } else {
      const auto bits = static_cast<uint16_t>(j % 2 == 0 ? pair : pair >> 16);
      T value;
      memcpy(&value, &bits, sizeof(value));
      return static_cast<M>(value);
    }
  } else {
    return widen<M>(raw.held, j);
  }
}

// A pack of kPack copies of `value`.
template <typename T, int kPack>
__device__ __forceinline__ Raw<T, kPack> filled(T value) {
  Raw<T, kPack> raw;
  if constexpr (Raw<T, kPack>::kWords) {
    uint16_t bits;
    memcpy(&bits, &value, sizeof(bits));
#pragma unroll
    for (int i = 0; i < 4; ++i) raw.held.word[i] = bits | uint32_t{bits} << 16;
  } else {
#pragma unroll
    for (int j = 0; j < kPack; ++j) raw.held.elem[j] = value;
  }
  return raw;
}

// kPack values of M rounded to T (vec.cuh's narrow), as a held pack.
template <typename T, int kPack, typename M>
__device__ __forceinline__ Raw<T, kPack> narrow_raw(const M (&values)[kPack]) {
  Raw<T, kPack> raw;
  if constexpr (Raw<T, kPack>::kWords) {
    const Pack<T, kPack> pack = narrow<T>(values);
    memcpy(raw.held.word, &pack, sizeof(pack));
  } else {
    raw.held = narrow<T>(values);
  }
  return raw;
}

// A held pack stored with one store instruction (vec.cuh's store_pack_global).
template <typename T, int kPack>
__device__ __forceinline__ void store_raw_global(T* ptr, const Raw<T, kPack>& raw) {
  if constexpr (Raw<T, kPack>::kWords) {
    store_words_global(ptr, raw.held.word);
  } else {
    store_pack_global<T, kPack>(ptr, raw.held);
  }
}

// Blocks an SM must hold at once, for __launch_bounds__: enough for kThreadsPerSm threads (or
// more, in whole blocks) on the 16-byte path: 1024 forward, at most 64 registers a thread, so that
// a block of 512 threads (rows of 16384 float32 values, and clusters) shares its SM with a second
// one whose loads overlap its reductions.
template <typename T, int kPack, int kBlockThreads, int kThreadsPerSm = 1024>
constexpr int kRowBlocksPerSm =
    kPack > 1 && !std::is_same_v<T, double> ? (kThreadsPerSm + kBlockThreads - 1) / kBlockThreads
                                            : row_engine::kMinBlocksPerSm<T>;

// A row's mean (0 for RMSNorm) and variance (RMSNorm: its mean square), from the packs a thread
// holds of it (zeros past the row's end, slice_length); every thread of the row gets the same
// bits. scratch and cluster: the block's shared slots and its cluster's rows, for row_allreduce.
template <typename M>
struct RowStatistics {
  M mean;
  M variance;
};

template <typename M, bool kCentered>
using StatisticsState = std::conditional_t<kCentered, Moments<M>, M>;

template <typename M, bool kCentered, int kThreadsPerRow, typename T, int kPack, int kPacks,
          typename Cluster>
__device__ __forceinline__ RowStatistics<M> row_statistics(const Raw<T, kPack> (&v)[kPacks],
                                                           int lane, int64_t slice_length,
                                                           int64_t cols,
                                                           StatisticsState<M, kCentered>* scratch,
                                                           Cluster& cluster) {
  if constexpr (!kCentered) {
    M squares = 0;
#pragma unroll
    for (int p = 0; p < kPacks; ++p)
#pragma unroll
      for (int j = 0; j < kPack; ++j) squares += value_of<M>(v[p], j) * value_of<M>(v[p], j);
    squares = row_allreduce<kThreadsPerRow>(squares, SumOp(), scratch, cluster);
    return {M(0), squares / M(cols)};
  } else {
    M total = 0;
#pragma unroll
    for (int p = 0; p < kPacks; ++p)
#pragma unroll
      for (int j = 0; j < kPack; ++j) total += value_of<M>(v[p], j);
    // The squared deviations of the thread's values in the row from `center`.
    const auto squared_deviations = [&](M center) {
      M m2 = 0;
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        if (pack_col<kPack, kThreadsPerRow>(p, lane) < slice_length) {
#pragma unroll
          for (int j = 0; j < kPack; ++j) {
            const M d = value_of<M>(v[p], j) - center;
            m2 += d * d;
          }
        }
      }
      return m2;
    };
    if constexpr (kThreadsPerRow <= kWarpSize) {
      // Rows within a warp (up to 32 threads) take the mean, then the squared deviations from
      // it, each summed by shuffles: fewer instructions than merging Moments (three values a
      // shuffle step, and a division where counts differ), which at short rows are a large share
      // of a value's budget (bfloat16 LayerNorm, rows of 128: 8 threads of 16 values each, 79% of
      // copy where RMSNorm's one sum reached 95%). Both are the two-pass variance of the row.
      const M mean = warp_allreduce_with<kThreadsPerRow>(total, SumOp()) / M(cols);
      const M m2 = warp_allreduce_with<kThreadsPerRow>(squared_deviations(mean), SumOp());
      return {mean, m2 / M(cols)};
    } else {
      // Longer rows: each thread's Moments (its own two-pass mean and deviations), merged over
      // the row's warps, blocks and cluster.
      constexpr int kColsPerThread = kPacks * kPack;
      int valid = 0;
#pragma unroll
      for (int p = 0; p < kPacks; ++p)
        if (pack_col<kPack, kThreadsPerRow>(p, lane) < slice_length) valid += kPack;
      // A thread whose packs are all in the row divides by its (power-of-two) value count: the
      // same bits as a multiplication by its reciprocal, without the division's ~15 instructions.
      constexpr bool kPowerOfTwo = (kColsPerThread & (kColsPerThread - 1)) == 0;
      const M local_mean = kPowerOfTwo && valid == kColsPerThread
                               ? total * (M(1) / M(kColsPerThread))
                           : valid > 0 ? total / M(valid)
                                       : M(0);
      const M m2 = squared_deviations(local_mean);
      // Every thread of the row holds kColsPerThread values, in groups of a power of two threads
      // (and clusters, whose sizes are): every merge of the butterflies is of equal halves.
      constexpr int64_t kCapacity = int64_t{kThreadsPerRow} * kColsPerThread;
      constexpr bool kHalves = (kThreadsPerRow & (kThreadsPerRow - 1)) == 0;
      // Not for the one-value packs of unaligned rows: there it spilled (float32, 512 threads of
      // 32 values: 28 bytes a thread, none with Moments alone).
      constexpr bool kEqualHalves = kEqualCountMoments && kHalves && kPack > 1;
      if (kEqualHalves && cols == cluster.blocks() * kCapacity) {
        // The scratch slots of Moments hold EqualMoments (fewer bytes) as well.
        const EqualMoments<M> row = row_allreduce<kThreadsPerRow>(
            EqualMoments<M>{local_mean, m2 * (M(1) / M(kColsPerThread))}, MergeEqualMoments(),
            reinterpret_cast<EqualMoments<M>*>(scratch), cluster);
        return {row.mean, row.variance};
      }
      Moments<M> state{M(valid), local_mean, m2};
      state = row_allreduce<kThreadsPerRow>(state, MergeMoments(), scratch, cluster);
      return {state.mean, state.m2 / M(cols)};
    }
  }
}

// The forward over clusters (rows past one block's registers), two choices measured on an H200
// against main's clusters (docs/benchmarks/layernorm, 2026-11-25d: the forward alone, 512 MiB
// inputs):
// - kWideClusterThreads: rows that clusters of 16 blocks of 512 threads would take go to clusters
//   of 8 blocks of this many threads (0: off). Clusters of 16 leave SMs idle (14 resident, 224
//   blocks where 264 fit; ncu: DRAM at 39% for LayerNorm float32 rows of 262144), and each row
//   waits on 16 blocks. At 1024: LayerNorm float32 rows of 262144 574 -> 462 us, add_layernorm
//   828 -> 693, add_rmsnorm 696 -> 614. Clusters of 8 or fewer stay at 512 threads: 1024 there
//   was slower in most cells (up to 54%: LayerNorm float32 32768 and bfloat16 65536), faster in
//   two (the residual forms' float32 rows of 65536, 2-4%); since then, one such block has
//   overtaken clusters of 2 at barriers (kForwardWideBlock).
// Two others were slower and are not kept (branch issue-21-fwd, b28a567): the row's cluster
// reduction by pushes into every block's shared memory, completing on an mbarrier instead of
// cluster barriers (faster only where clusters of 16 ran, LayerNorm float32 262144 574 -> 438
// us, which wide clusters now take; float32 131072 360 -> 410 us, add_layernorm bfloat16
// 65536-262144 5% slower); and blocks of 4 packs a thread loading the next row during the row's
// reductions, in registers (LayerNorm bfloat16 rows of 65536 327 -> 441 us). Nor are rows read
// and written as streams (ld/st.global.cs, so that the weight and bias stay cached): 2-7% slower
// at rows of 16384-262144 but LayerNorm float32 262144 (2026-11-28; bfloat16 16384 139 -> 150 us).
// Nor is a block a row reading it twice, the second time from L2 (16-byte packs, 4 a thread in
// flight, two blocks an SM; 2026-11-29e): 2-41% slower at every row of 32768-262144 (LayerNorm
// float32 32768 300 -> 412 us; bfloat16 131072 326 -> 450).
constexpr int kWideClusterThreads = 1024;

// Rows a cluster of 2 blocks of 512 threads would take in the forward (float32 16385-32768,
// 16-bit 32769-65536; float32 with a residual from 8193) in one block of kWideClusterThreads
// instead, no cluster (the wide clusters' kernel, launched as a cluster of 1): a block barrier in
// place of the cluster's. Taken where those clusters would reduce by barriers; where they reduce
// by pushes (kForwardClusterPushes: LayerNorm float32) they stay faster, and 16-bit rows with a
// residual keep their clusters (the wide block spills 28 bytes a thread there). The forward on an
// H200, us, clusters of 2 (timed before and after) -> one wide block (2026-11-30d): RMSNorm
// float32 4096x32768 284.4 / 284.6 -> 274.4, bfloat16 4096x65536 289.1 / 290.4 -> 279.5; LayerNorm
// bfloat16 4096x65536 307.2 / 307.1 -> 296.4; add_rmsnorm float32 4096x32768 549.5 / 548.4 ->
// 541.5, 8192x16384 552.6 / 551.8 -> 539.4. Not taken: LayerNorm float32 4096x32768 274.5 / 273.2
// -> 281.1, add_layernorm bfloat16 4096x65536 595.8 / 596.6 -> 606.7, add_rmsnorm bfloat16 567.3 /
// 567.0 -> 571.4 (add_layernorm float32 within 0.5%).
template <typename T, bool kCentered, bool kResidual>
constexpr bool kForwardWideBlock =
    !kForwardClusterPushes<T, kCentered> && !(kResidual && sizeof(T) < 4);

// Whether rows of `cols` take a cluster of 16 blocks that hold `block_cols` each (no cluster of 8
// holds them): the rows kWideClusterThreads gives wider blocks.
constexpr bool takes_sixteen_blocks(int64_t cols, int64_t block_cols) {
  return cols > block_cols * (kMaxClusterBlocks / 2) && cols <= block_cols * kMaxClusterBlocks;
}

// Parameter packs a forward thread loads ahead of their use (forward_params_ahead; 0: none).
// Without it ptxas issues each pack's parameter loads only after the previous pack's store: an L2
// round trip a pack, in series, for rows over clusters (whose barriers invalidate L1).
constexpr int kForwardParamsAhead = 1;

// kForwardParamsAhead for RMSNorm's weight in x's dtype at rows of a block of 512 threads or more
// (its one parameter fits beside the row: no spills, nvcc 13.0, sm_90a). The forward on an H200
// (2026-11-29h), us: bfloat16 rows of 262144 333 -> 310, float32 131072 326 -> 306, 262144 349
// -> 321, 1-3% elsewhere. Likewise LayerNorm's weight where its bias is in shared memory
// (kBiasStaged: forward_staged_bias), and the residual forms': add_rmsnorm float32 rows of 262144
// 617 -> 593 us, bfloat16 within 1% (2026-11-29i). None otherwise: LayerNorm's weight and bias
// both ahead spilled 56-72 bytes a thread in float32 and ran 5-23% slower, float32 parameters of
// 16-bit rows spilled 308-320.
template <typename T, typename W, bool kCentered, int kPack, int kPacks, int kThreadsPerRow,
          bool kBiasStaged = false>
constexpr int forward_params_ahead() {
  return (!kCentered || kBiasStaged) && std::is_same_v<T, W> && kPack > 1 && kPacks >= 8 &&
                 kThreadsPerRow >= kMaxRowThreads
             ? kForwardParamsAhead
             : 0;
}

// Whether a LayerNorm forward block over clusters keeps its slice of the bias in shared memory
// for all its rows (each thread its own packs' slots), so that, with its weight loaded a pack
// ahead (forward_params_ahead), neither parameter is an L2 round trip in each pack's chain:
// float32 rows, where the bias of its blocks an SM fits kStagedBiasBudget. The forward on an H200
// (docs/benchmarks/layernorm, 2026-11-29i), us, without -> with: float32 rows of 32768 299 ->
// 296, 65536 316 -> 305, 131072 348 -> 312, 262144 392 -> 337; add_layernorm 65536 570 -> 555,
// 131072 599 -> 573, 262144 663 -> 598 (32768 the same). bfloat16 rows (8 bytes a thread spilled
// at 512 threads) went both ways, 65536 308 -> 320 and 262144 341 -> 341, and keep loading both
// where used. The weight in shared memory as well does not fit two blocks an SM, and the weight
// alone there, the bias from L2, changed nothing.
// The budget is sized for the 228 KB an SM of sm_90 and sm_100: where an SM has less (sm_120's
// 100 KB), the staged blocks run one an SM instead of two, and a launch whose staged bytes do not
// fit at all takes launch_forward_with's next path (launch_forward_over_clusters returns
// false).
constexpr bool kStagedForwardBias = true;
constexpr size_t kStagedBiasBudget = 160 * 1024;  // bytes an SM

template <typename T, typename W, bool kCentered, int kPack, int kBlockThreads, int kColsPerThread>
constexpr bool forward_staged_bias() {
  return kStagedForwardBias && kCentered && std::is_same_v<T, float> &&
         kBlockThreads >= kMaxRowThreads &&
         size_t{kBlockThreads} * kColsPerThread * sizeof(W) *
                 kRowBlocksPerSm<T, kPack, kBlockThreads> <=
             kStagedBiasBudget;
}

// kPushes: its cluster reductions by pushes (kForwardClusterPushes, kForwardWideClusterPushes).
// kBiasStaged: it keeps the bias in shared memory for all its rows (forward_staged_bias; only
// launch_forward_over_clusters sets it, and gives the block the bytes).
template <typename T, typename W, bool kCentered, bool kResidual, int kPack, int kColsPerThread,
          int kThreadsPerRow, bool kPushes = false, bool kBiasStaged = false>
__global__ void __launch_bounds__(block_threads_for<kThreadsPerRow>(),
                                  kRowBlocksPerSm<T, kPack, block_threads_for<kThreadsPerRow>()>)
    forward_rows_kernel(ForwardArgs<T, W> a, int64_t slice_cols, int cluster_blocks) {
  using M = at::opmath_type<T>;
  constexpr int kBlockThreads = block_threads_for<kThreadsPerRow>();
  constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  constexpr int kPacks = kColsPerThread / kPack;
  static_assert(kColsPerThread % kPack == 0, "a thread holds whole packs");
  using State = StatisticsState<M, kCentered>;
  __shared__ State scratch[kBlockThreads / kWarpSize];
  __shared__ ClusterShared<kPushes> cluster_shared;
  ClusterRows<kPushes> cluster(cluster_shared, cluster_blocks);
  const int lane = threadIdx.x % kThreadsPerRow;
  const int row_in_block = threadIdx.x / kThreadsPerRow;
  const int rank = blockIdx.x % cluster_blocks;
  const int64_t slice_begin = rank * slice_cols;
  const int64_t slice_length = max(int64_t{0}, min(a.cols - slice_begin, slice_cols));
  const int64_t groups = gridDim.x / cluster_blocks;
  // The staged bias: pack p of thread t at p * kBlockThreads + t. Each thread reads only what it
  // wrote: no barrier.
  extern __shared__ __align__(kVectorBytes) unsigned char staged_bytes[];
  [[maybe_unused]] Raw<W, kPack>* const staged_bias =
      reinterpret_cast<Raw<W, kPack>*>(staged_bytes);
  if constexpr (kBiasStaged) {
    if (a.bias != nullptr) {
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
        staged_bias[p * kBlockThreads + threadIdx.x] =
            load_raw<W, kPack>(a.bias + slice_begin + col, col < slice_length);
      }
    }
  }
  cluster.open();
  // The whole block (cluster) steps together, so every thread reaches the barriers.
  for (int64_t first_row = blockIdx.x / cluster_blocks * kRowsPerBlock; first_row < a.rows;
       first_row += groups * kRowsPerBlock) {
    const bool row_valid = first_row + row_in_block < a.rows;
    const int64_t row = min(first_row + row_in_block, a.rows - 1);
    const int64_t offset = row * a.cols + slice_begin;
    // Every load of the row first, then the sums: all of a thread's packs are in flight at once.
    Raw<T, kPack> v[kPacks];
    [[maybe_unused]] Raw<T, kPack> r[kResidual ? kPacks : 1];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
      v[p] = load_raw<T, kPack>(a.x + offset + col, col < slice_length);
      if constexpr (kResidual)
        r[p] = load_raw<T, kPack>(a.residual + offset + col, col < slice_length);
    }
    if constexpr (kResidual) {
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        if (pack_col<kPack, kThreadsPerRow>(p, lane) < slice_length) {
          // The sum is rounded to T before it is normalized, as x + residual in T would be: the
          // backward reads that rounded sum.
          M sum[kPack];
#pragma unroll
          for (int j = 0; j < kPack; ++j) sum[j] = value_of<M>(v[p], j) + value_of<M>(r[p], j);
          v[p] = narrow_raw<T, kPack>(sum);
        }
      }
    }
    const RowStatistics<M> statistics = row_statistics<M, kCentered, kThreadsPerRow>(
        v, lane, slice_length, a.cols, scratch, cluster);
    const M mean = statistics.mean;
    const M variance = statistics.variance;
    const M rstd = M(1) / sqrt(variance + a.eps);  // sqrt, then divide: rsqrtf is 2 ulp
    // The parameters' presence is the same for every thread: each combination has its own
    // loop, so a missing one costs nothing per value. (Selecting between a loaded pack and a
    // filled one per pack took two PRMTs per 16-bit value: the bfloat16 LayerNorm forward spent
    // ~144 instructions on a pack of 8 outputs, ~70 now, and spilled 50 bytes a thread.)
    const auto write_row = [&](auto has_weight, auto has_bias) {
      // The parameters' packs as loaded, widened where used (as v's): fewer live registers than
      // widened copies in a kernel bounded to 64 a thread; kAhead packs ahead of their use
      // (forward_params_ahead), else each where it is used.
      constexpr int kAhead =
          forward_params_ahead<T, W, kCentered, kPack, kPacks, kThreadsPerRow, kBiasStaged>();
      Raw<W, kPack> w[kPacks];
      // Pack p's weight (zeros where not `valid`), and its bias where the pack is in the row.
      const auto load_weight = [&](int p, bool valid) {
        const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
        if constexpr (decltype(has_weight)::value)
          w[p] = load_raw<W, kPack>(a.weight + slice_begin + col, valid);
      };
      const auto bias_of = [&](int p) -> Raw<W, kPack> {
        if constexpr (kBiasStaged) return staged_bias[p * kBlockThreads + threadIdx.x];
        return load_raw<W, kPack>(a.bias + slice_begin + pack_col<kPack, kThreadsPerRow>(p, lane),
                                  true);
      };
      // Packs loaded ahead may be past the row's end.
      const auto in_row = [&](int p) {
        return pack_col<kPack, kThreadsPerRow>(p, lane) < slice_length;
      };
#pragma unroll
      for (int p = 0; p < kAhead; ++p) load_weight(p, in_row(p));
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        if constexpr (kAhead > 0)
          if (p + kAhead < kPacks) load_weight(p + kAhead, in_row(p + kAhead));
        const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
        if (col < slice_length) {
          if constexpr (kAhead == 0) load_weight(p, true);
          Raw<W, kPack> b;
          if constexpr (decltype(has_bias)::value) b = bias_of(p);
          M out[kPack];
#pragma unroll
          for (int j = 0; j < kPack; ++j) {
            M value = (value_of<M>(v[p], j) - mean) * rstd;
            if constexpr (decltype(has_weight)::value) value *= value_of<M>(w[p], j);
            if constexpr (decltype(has_bias)::value) value += value_of<M>(b, j);
            out[j] = value;
          }
          store_pack_global<T, kPack>(a.y + offset + col, narrow<T>(out));
          if constexpr (kResidual) store_raw_global<T, kPack>(a.sum + offset + col, v[p]);
        }
      }
    };
    if (row_valid) {
      if constexpr (kCentered) {
        if (a.bias != nullptr) {
          if (a.weight != nullptr) {
            write_row(std::true_type(), std::true_type());
          } else {
            write_row(std::false_type(), std::true_type());
          }
        } else if (a.weight != nullptr) {
          write_row(std::true_type(), std::false_type());
        } else {
          write_row(std::false_type(), std::false_type());
        }
      } else if (a.weight != nullptr) {
        write_row(std::true_type(), std::false_type());
      } else {
        write_row(std::false_type(), std::false_type());
      }
      if (lane == 0 && rank == 0) {
        if constexpr (kCentered) a.mean[row] = mean;
        a.rstd[row] = rstd;
      }
    }
    cluster.end_row();
  }
  cluster.close();
}

// Threads an SM holds in the backward, which keeps two rows' packs and the weight: 768 (at most
// 80 registers a thread, none spilled) in blocks of up to 256 threads; blocks of 512 (rows of 8192
// bfloat16 or 4096 float32 values, and clusters) two an SM, 64 registers (with the weight in
// shared memory, kSharedWeight, and the column sums made before dx, kSumsFirst, bfloat16 LayerNorm
// spills none there, 24 bytes with float32 parameters; still more loads in flight than one block
// of 512 an SM).
constexpr int kBackwardThreadsPerSm = 768;

// Packs of a row a backward thread holds while it loads the next row's ahead: x and dy of two
// rows in registers (kDeepBackwardClusters' threads hold twice as many and load none ahead).
constexpr int kBackwardPacks = 2;

// Rows past 8 backward blocks of 512 threads (float32 rows over 32768, bfloat16 over 65536) go to
// clusters of up to 16 blocks of this many threads (0: off), one an SM at the same 64 registers a
// thread, as the forward's kWideClusterThreads; so rows up to twice what 16 narrow blocks hold
// (float32 131072, bfloat16 262144) are read from DRAM once, not by the slices kernel. The
// backward kernel on an H200 (docs/benchmarks/layernorm: a training step, 512 MiB inputs), us,
// 512 -> 1024 (2026-11-29e): LayerNorm float32 rows of 65536 818 -> 584, bfloat16 131072 950 ->
// 756; RMSNorm 560 -> 478 and 632 -> 570; the residual forms 658-1023 -> 627-811. Slices ->
// 16 wide blocks (2026-11-29g, with the pushes of kBackwardClusterPushes; under cluster barriers
// they went both ways), float32 131072 / bfloat16 262144: LayerNorm 588 -> 395 / 855 -> 543,
// RMSNorm 802 -> 401 / 618 -> 441, add_layernorm 887 -> 630 / 960 -> 800, add_rmsnorm 1073 ->
// 595 / 921 -> 655. Not kept: wide clusters from 4 blocks (float32 rows of 32768:
// LayerNorm 519 -> 482 us, RMSNorm 416 -> 444).
constexpr int kWideBackwardClusterThreads = 1024;

// float32 rows longer than kWideBackwardClusterThreads' clusters hold (past 131072) go to clusters
// of up to 16 such blocks whose threads hold twice the packs (kBackwardPacks) and load each row
// where it starts: a row read from DRAM once, up to 262144 values (false: the slices kernel).
// The backward kernel on an H200 (2026-11-29g, a training step, rows of 262144), us, slices ->
// deep: LayerNorm 738 -> 614, RMSNorm 800 -> 544, add_rmsnorm 1054 -> 707. LayerNorm with a
// residual holds the most a thread (x, dy, the sum's gradient, two sums) and spilled 96 bytes a
// thread there, 878 -> 929 us: it keeps the slices kernel. 16-bit rows are left out: their
// column sums at 32 values a thread need 256 KB a block.
constexpr bool kDeepBackwardClusters = true;

// The backward's per-column sums (dy * xhat, and dy when it centers) of a thread's columns over
// its rows live in dynamic shared memory, not registers: kSums arrays of kBlockThreads *
// kColsPerThread values, each thread owning its slots, so no barrier guards them until the block
// adds its row groups at the end. In registers they cost 32 registers a thread for bfloat16
// LayerNorm, whose backward then wanted 120 (3 blocks of 128 threads an SM, or spills under a cap).
// A thread's slots of pack p are kVec-value vectors (float4 where the pack holds whole ones), laid
// out so that consecutive threads touch consecutive 16 bytes: no bank conflicts.
template <typename M, int kPack>
constexpr int kSumVec = sizeof(M) == 4 && kPack % 4 == 0 ? 4 : 1;

template <bool kCentered>
constexpr int kSumArrays = kCentered ? 2 : 1;

// Backward blocks of 512 threads or more: one or two an SM, at 64 registers a thread
// (kBackwardThreadsPerSm), where the kernel trades loads ahead and live values for no spills.
template <int kBlockThreads>
constexpr bool kAtRegisterCap = kBlockThreads >= kMaxRowThreads;

// Such blocks keep the weight of a thread's columns in shared memory too, each thread its own
// slots: in registers it left too few for one st.global.v4 a dx pack, and the dx packs went out
// as four 4-byte stores each, which made the cluster backward (bfloat16 rows of 32768 on an H200)
// bound by L2 at 80% of its throughput and 34% of DRAM's.
template <int kBlockThreads>
constexpr bool kSharedWeight = kAtRegisterCap<kBlockThreads>;

template <typename M, typename W, bool kCentered, int kBlockThreads, int kColsPerThread>
constexpr size_t backward_smem_bytes() {
  return size_t{kSumArrays<kCentered>} * kBlockThreads * kColsPerThread * sizeof(M) +
         (kSharedWeight<kBlockThreads> ? size_t{kBlockThreads} * kColsPerThread * sizeof(W) : 0);
}

// The offset (in values) of column slot (p, j) of thread t in one sums array.
template <typename M, int kPack, int kBlockThreads>
__device__ __forceinline__ int sum_slot(int p, int j, int t) {
  constexpr int kVec = kSumVec<M, kPack>;
  return ((p * kPack + j) / kVec * kBlockThreads + t) * kVec + j % kVec;
}

// Zeroes this thread's slots of pack p.
template <typename M, int kPack, int kBlockThreads>
__device__ __forceinline__ void clear_sums(M* sums, int p) {
  constexpr int kVec = kSumVec<M, kPack>;
  Pack<M, kVec> zero;
#pragma unroll
  for (int i = 0; i < kVec; ++i) zero.elem[i] = M(0);
#pragma unroll
  for (int q = 0; q < kPack; q += kVec)
    store_pack<M, kVec>(sums + sum_slot<M, kPack, kBlockThreads>(p, q, threadIdx.x), zero);
}

// sums[slots of (p, q .. q + kVec)] += values: one vector of pack p's slots.
template <typename M, int kPack, int kBlockThreads>
__device__ __forceinline__ void add_vec_to_sums(M* sums, int p, int q,
                                                const M (&values)[kSumVec<M, kPack>]) {
  constexpr int kVec = kSumVec<M, kPack>;
  M* at = sums + sum_slot<M, kPack, kBlockThreads>(p, q, threadIdx.x);
  Pack<M, kVec> total = load_pack<M, kVec>(at);
#pragma unroll
  for (int i = 0; i < kVec; ++i) total.elem[i] += values[i];
  store_pack<M, kVec>(at, total);
}

// sums[slot of (p, j)] += values[j] for a pack's kPack values, kVec at a time.
template <typename M, int kPack, int kBlockThreads>
__device__ __forceinline__ void add_to_sums(M* sums, int p, const M (&values)[kPack]) {
  constexpr int kVec = kSumVec<M, kPack>;
#pragma unroll
  for (int q = 0; q < kPack; q += kVec) {
    M part[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) part[i] = values[q + i];
    add_vec_to_sums<M, kPack, kBlockThreads>(sums, p, q, part);
  }
}

// What the backward reads of one row group: each thread's packs of x (or the sum), dy and, with
// a residual, the sum's gradient, and the row's statistics.
template <typename T, typename M, bool kResidual, int kPack, int kPacks>
struct BackwardRow {
  Raw<T, kPack> x[kPacks];
  Raw<T, kPack> dy[kPacks];
  Raw<T, kPack> dsum[kResidual ? kPacks : 1];
  M mean;
  M rstd;
};

// Backward of a row held in registers: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with
// g = dy * weight (RMSNorm: no mean(g) term), plus the sum output's gradient; each thread adds
// dy * xhat and dy of its columns over its rows, and the block writes them as its partial row.
// Blocks stay resident and loop over rows (each writes one partial row, so their number bounds
// the second pass), and each loads its next row before it reduces the current one: a looping
// block's loads are then in flight through its reductions and stores, not only between them.
// The weight of a thread's columns is loaded once, for all its rows; the column sums are in
// shared memory (see kSumVec), backward_smem_bytes of it.
template <typename T, typename W, bool kCentered, bool kResidual, int kPack, int kColsPerThread,
          int kThreadsPerRow>
__global__ void __launch_bounds__(
    block_threads_for<kThreadsPerRow>(),
    kRowBlocksPerSm<T, kPack, block_threads_for<kThreadsPerRow>(), kBackwardThreadsPerSm>)
    backward_rows_kernel(BackwardArgs<T, W> a, int64_t slice_cols, int cluster_blocks) {
  using M = at::opmath_type<T>;
  constexpr int kBlockThreads = block_threads_for<kThreadsPerRow>();
  constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  constexpr int kPacks = kColsPerThread / kPack;
  constexpr int kCapacity = kThreadsPerRow * kColsPerThread;
  using State = GradSums<M>;
  using Row = BackwardRow<T, M, kResidual, kPack, kPacks>;
  // Each row's loads are issued before the previous row is reduced, except with a residual in
  // blocks at the register cap (kAtRegisterCap: two rows of x, dy and the sum's gradient): there
  // the row loaded ahead spilled 44 bytes a thread (bfloat16 add_rmsnorm), and loading each row
  // where it starts spills none and measured faster on an H200 (2026-11-25, a training step's
  // backward kernel: bfloat16 rows of 8192 620 -> 562 us, 32768 655 -> 628 us; float32 rows of 4096
  // and 32768 within 1%). Without a residual the same change measured 3% slower at rows of 32768
  // and 3% faster at 65536-131072: those keep loading ahead. Deep clusters' threads
  // (kDeepBackwardClusters) hold twice the packs instead of a row loaded ahead.
  constexpr bool kLoadAhead =
      !(kResidual && kAtRegisterCap<kBlockThreads>) && kPacks <= kBackwardPacks;
  // Blocks at the register cap (kAtRegisterCap) add a pack's column sums before its dx, a
  // vector of slots at a time (xhat computed again there), rather than from the dx loop's values,
  // which kept 16 more floats live a pack: bfloat16 LayerNorm spilled 28 bytes a thread that way
  // and none this way (nvcc 13.0, sm_90a). Its backward kernel on an H200 (2026-11-25c, a
  // training step, 512 MiB inputs): rows of 8192 446 -> 425 us, 32768 573 -> 550, 65536 642 ->
  // 602, 131072 989 -> 951; float32 (no spills either way) within 0.6%. Smaller blocks (up to 80
  // registers, no spills, near the issue limit at short rows) keep the dx loop's values.
  constexpr bool kSumsFirst = kAtRegisterCap<kBlockThreads>;
  __shared__ State scratch[kBlockThreads / kWarpSize];
  // Only rows of a whole block are split over clusters: blocks of several rows keep the
  // barriers' code, which they never run, as it was.
  constexpr bool kPushes = kBackwardClusterPushes && kRowsPerBlock == 1;
  __shared__ ClusterShared<kPushes> cluster_shared;
  ClusterRows<kPushes> cluster(cluster_shared, cluster_blocks);
  const int lane = threadIdx.x % kThreadsPerRow;
  const int row_in_block = threadIdx.x / kThreadsPerRow;
  const int rank = blockIdx.x % cluster_blocks;
  const int64_t slice_begin = rank * slice_cols;
  const int64_t slice_length = max(int64_t{0}, min(a.cols - slice_begin, slice_cols));
  const int64_t group = blockIdx.x / cluster_blocks;
  const int64_t groups = gridDim.x / cluster_blocks;
  const int64_t step = groups * kRowsPerBlock;
  const M inv_cols = M(1) / M(a.cols);
  const bool has_dsum = kResidual && a.dsum != nullptr;
  // Threads past a row's end (or past the last row, which they redo) load nothing they use.
  const auto load_row = [&](int64_t first_row, Row& next) {
    const int64_t row = min(first_row + row_in_block, a.rows - 1);
    const int64_t offset = row * a.cols + slice_begin;
    next.mean = kCentered ? a.mean[row] : M(0);
    next.rstd = a.rstd[row];
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
      const bool valid = col < slice_length;
      next.x[p] = load_raw<T, kPack>(a.x + offset + col, valid);
      next.dy[p] = load_raw<T, kPack>(a.dy + offset + col, valid);
      if constexpr (kResidual)
        next.dsum[p] = load_raw<T, kPack>(a.dsum + offset + col, valid && has_dsum);
    }
  };
  extern __shared__ __align__(kVectorBytes) unsigned char sums_bytes[];
  M* const dweight = reinterpret_cast<M*>(sums_bytes);
  M* const dbias = dweight + kBlockThreads * kColsPerThread;  // when it centers
  // The weight of this thread's columns: in registers, or (kSharedWeight) in its own slots of
  // shared memory after the sums, pack p of thread t at (p * kBlockThreads + t) * kPack.
  constexpr bool kWeightShared = kSharedWeight<kBlockThreads>;
  [[maybe_unused]] Raw<W, kPack>* const shared_weight = reinterpret_cast<Raw<W, kPack>*>(
      dweight + kSumArrays<kCentered> * kBlockThreads * kColsPerThread);
  Raw<W, kPack> w[kWeightShared ? 1 : kPacks];
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
    const Raw<W, kPack> loaded =
        a.weight != nullptr ? load_raw<W, kPack>(a.weight + slice_begin + col, col < slice_length)
                            : filled<W, kPack>(W(1));
    if constexpr (kWeightShared) {
      shared_weight[p * kBlockThreads + threadIdx.x] = loaded;
    } else {
      w[p] = loaded;
    }
  }
  const auto weight_of = [&](int p) -> Raw<W, kPack> {
    if constexpr (kWeightShared) {
      return shared_weight[p * kBlockThreads + threadIdx.x];
    } else {
      return w[p];
    }
  };
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    clear_sums<M, kPack, kBlockThreads>(dweight, p);
    if constexpr (kCentered) clear_sums<M, kPack, kBlockThreads>(dbias, p);
  }
  Row next;
#pragma unroll
  for (int p = 0; p < kPacks; ++p) {
    next.x[p] = next.dy[p] = filled<T, kPack>(T(0));
    if constexpr (kResidual) next.dsum[p] = filled<T, kPack>(T(0));
  }
  cluster.open();
  if (group * kRowsPerBlock < a.rows) load_row(group * kRowsPerBlock, next);
  for (int64_t first_row = group * kRowsPerBlock; first_row < a.rows; first_row += step) {
    const bool row_valid = first_row + row_in_block < a.rows;
    const int64_t row = min(first_row + row_in_block, a.rows - 1);
    const int64_t offset = row * a.cols + slice_begin;
    if (!kLoadAhead && first_row != group * kRowsPerBlock) load_row(first_row, next);
    const Row now = next;
    if (kLoadAhead && first_row + step < a.rows) load_row(first_row + step, next);
    const auto xhat_at = [&](int p, int j) {
      return (value_of<M>(now.x[p], j) - now.mean) * now.rstd;
    };
    State sums{M(0), M(0)};
#pragma unroll
    for (int p = 0; p < kPacks; ++p) {
      if (pack_col<kPack, kThreadsPerRow>(p, lane) < slice_length) {
        const Raw<W, kPack> weight = weight_of(p);
#pragma unroll
        for (int j = 0; j < kPack; ++j) {
          const M g = product(value_of<M>(now.dy[p], j), value_of<M>(weight, j));
          sums.g += g;
          sums.g_xhat += g * (value_of<M>(now.x[p], j) - now.mean);
        }
      }
    }
    sums = row_allreduce<kThreadsPerRow>(sums, AddGradSums(), scratch, cluster);
    const M mean_g = kCentered ? sums.g * inv_cols : M(0);
    const M mean_g_xhat = sums.g_xhat * now.rstd * inv_cols;
    // The column sums of pack p's values, kVec at a time, each added as it is made.
    [[maybe_unused]] const auto add_row_to_sums = [&](int p) {
      constexpr int kVec = kSumVec<M, kPack>;
#pragma unroll
      for (int q = 0; q < kPack; q += kVec) {
        M dy_xhat[kVec];
        M dy_values[kVec];
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          dy_values[i] = value_of<M>(now.dy[p], q + i);
          dy_xhat[i] = dy_values[i] * xhat_at(p, q + i);
        }
        add_vec_to_sums<M, kPack, kBlockThreads>(dweight, p, q, dy_xhat);
        if constexpr (kCentered) add_vec_to_sums<M, kPack, kBlockThreads>(dbias, p, q, dy_values);
      }
    };
    if (row_valid) {
#pragma unroll
      for (int p = 0; p < kPacks; ++p) {
        const int64_t col = pack_col<kPack, kThreadsPerRow>(p, lane);
        if (col < slice_length) {
          if constexpr (kSumsFirst) add_row_to_sums(p);
          const Raw<W, kPack> weight = weight_of(p);
          M out[kPack];
          [[maybe_unused]] M dy_xhat[kPack];
          [[maybe_unused]] M dy_values[kPack];
#pragma unroll
          for (int j = 0; j < kPack; ++j) {
            const M dy = value_of<M>(now.dy[p], j);
            const M xhat = xhat_at(p, j);
            M dx = now.rstd * (product(dy, value_of<M>(weight, j)) - mean_g - xhat * mean_g_xhat);
            if constexpr (kResidual) {
              if (has_dsum) dx += value_of<M>(now.dsum[p], j);
            }
            out[j] = dx;
            if constexpr (!kSumsFirst) {
              dy_xhat[j] = dy * xhat;
              dy_values[j] = dy;
            }
          }
          store_pack_global<T, kPack>(a.dx + offset + col, narrow<T>(out));
          if constexpr (!kSumsFirst) {
            add_to_sums<M, kPack, kBlockThreads>(dweight, p, dy_xhat);
            if constexpr (kCentered) add_to_sums<M, kPack, kBlockThreads>(dbias, p, dy_values);
          }
        }
      }
    }
    cluster.end_row();
  }
  cluster.close();
  // The block's partial row: its rows' sums, added in a fixed order.
  const bool want_weight = a.partial_dweight != nullptr;
  const bool want_bias = kCentered && a.partial_dbias != nullptr;
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
        const int slot = sum_slot<M, kPack, kBlockThreads>(p, j, threadIdx.x);
        if (want_weight) a.partial_dweight[at + j] = dweight[slot];
        if (want_bias) a.partial_dbias[at + j] = dbias[slot];
      }
    }
  } else {
    // Several row groups: column c's groups are added in order, from every thread's slots.
    __syncthreads();
    for (int col = threadIdx.x; col < kCapacity && col < a.cols; col += kBlockThreads) {
      const int p = col / (kThreadsPerRow * kPack);
      const int owner = col / kPack % kThreadsPerRow;
      const int j = col % kPack;
      M weight_total = 0;
      M bias_total = 0;
#pragma unroll
      for (int g = 0; g < kRowsPerBlock; ++g) {
        const int slot = sum_slot<M, kPack, kBlockThreads>(p, j, g * kThreadsPerRow + owner);
        weight_total += dweight[slot];
        if (want_bias) bias_total += dbias[slot];
      }
      if (want_weight) a.partial_dweight[group * a.cols + col] = weight_total;
      if (want_bias) a.partial_dbias[group * a.cols + col] = bias_total;
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

// ---- Backward rows too long for a cluster's registers: a cluster per row, each block owning a
// slice of the columns for every row it visits. It reads its slice twice, the second time from L2
// (a block's slice of x and dy is at most 2 x 64 KB), and keeps the slice's column sums in shared
// memory, so a partial row is a cluster's, not a block's: a block per row with its own partial
// row wrote as many partial rows as rows (1 GB of them for float32 rows of 262144) and ran at
// 13-28% of copy on an H200. ----

constexpr int kSliceThreads = 512;
// Packs of each input a thread loads before it uses any: in the pass that writes dx
// (kSliceBatch), and in the pass that sums the row (x and dy only): kSliceBatch, or
// kSliceSumsBatch in the kernel that loads ahead (kAhead).
constexpr int kSliceBatch = 2;
constexpr int kSliceSumsBatch = 4;
// How the kernel that loads ahead (kAhead) brings its slice of the next row it visits toward the
// SM while it works on the current one: 0 not at all, 1 a prefetch to L2 every 128 bytes, from
// every thread, 2 bulk prefetches to L2 (sm_90's copy engine), a chunk a warp. Without it
// each row's first pass waits on DRAM, and the cluster's barriers leave DRAM idle between rows.
// LayerNorm's slices backward on an H200 (2026-11-25d, a training step, 512 MiB inputs; the row
// sums' pass 4 packs ahead in both): bfloat16 rows of 262144 1233 -> 1126 us with 2, 1112 with
// 1; float32 rows of 131072 (two blocks an SM) 791 -> 745 with 2, 736 with 1; float32 rows of
// 262144 (one block an SM) 861 -> 896 with 2, 894 with 1, slower: those plans keep the kernel that
// does not load ahead (see launch_backward_with).
constexpr int kSlicePrefetch = 2;

// Brings `count` values of T from `begin` (16-byte aligned, count * sizeof(T) a multiple of 16)
// into L2, as kSlicePrefetch says; every thread of the block calls it.
template <typename T, int kBlockThreads>
__device__ __forceinline__ void prefetch_span(const T* begin, int64_t count) {
  const int64_t bytes = count * static_cast<int64_t>(sizeof(T));
  const char* const first = reinterpret_cast<const char*>(begin);
  if constexpr (kSlicePrefetch == 1) {
    for (int64_t i = int64_t{threadIdx.x} * 128; i < bytes; i += int64_t{kBlockThreads} * 128)
      prefetch_l2(first + i);
  } else if constexpr (kSlicePrefetch == 2) {
    constexpr int kWarps = kBlockThreads / kWarpSize;
    const int64_t chunk = (bytes + kWarps * 16 - 1) / (kWarps * 16) * 16;  // whole 16 bytes
    const int64_t from = threadIdx.x / kWarpSize * chunk;
    if (threadIdx.x % kWarpSize == 0 && from < bytes)
      bulk_prefetch_l2(first + from, static_cast<uint32_t>(min(chunk, bytes - from)));
  }
}

template <typename T, typename W, bool kCentered, bool kResidual, int kPack, bool kAhead>
__global__ void __launch_bounds__(kSliceThreads, 2)
    backward_slices_kernel(BackwardArgs<T, W> a, int64_t slice_cols, int cluster_blocks) {
  using M = at::opmath_type<T>;
  using State = GradSums<M>;
  constexpr int kVec = kSumVec<M, kPack>;
  __shared__ State scratch[kSliceThreads / kWarpSize];
  __shared__ ClusterShared<kBackwardClusterPushes> cluster_shared;
  ClusterRows<kBackwardClusterPushes> cluster(cluster_shared, cluster_blocks);
  // The slice's column sums, in column order: dy * xhat, then (when it centers) dy.
  extern __shared__ __align__(kVectorBytes) unsigned char sums_bytes[];
  M* const dweight = reinterpret_cast<M*>(sums_bytes);
  M* const dbias = dweight + slice_cols;
  const int rank = blockIdx.x % cluster_blocks;
  const int64_t slice_begin = rank * slice_cols;
  const int64_t slice_length = max(int64_t{0}, min(a.cols - slice_begin, slice_cols));
  const int64_t slice_packs = slice_length / kPack;
  const int64_t group = blockIdx.x / cluster_blocks;
  const int64_t groups = gridDim.x / cluster_blocks;
  const M inv_cols = M(1) / M(a.cols);
  const bool has_dsum = kResidual && a.dsum != nullptr;
  for (int64_t i = threadIdx.x; i < kSumArrays<kCentered> * slice_cols; i += kSliceThreads)
    dweight[i] = M(0);
  __syncthreads();
  cluster.open();
  const auto weight_at = [&](int64_t p) {
    return a.weight != nullptr ? load_raw<W, kPack>(a.weight + slice_begin + p * kPack, true)
                               : filled<W, kPack>(W(1));
  };
  for (int64_t row = group; row < a.rows; row += groups) {
    const int64_t offset = row * a.cols + slice_begin;
    const M mean = kCentered ? a.mean[row] : M(0);
    const M rstd = a.rstd[row];
    // The slice of the block's next row, on its way to L2 while this one is done.
    if constexpr (kAhead) {
      if (row + groups < a.rows) {
        const int64_t ahead = offset + groups * a.cols;
        prefetch_span<T, kSliceThreads>(a.x + ahead, slice_length);
        prefetch_span<T, kSliceThreads>(a.dy + ahead, slice_length);
        if (has_dsum) prefetch_span<T, kSliceThreads>(a.dsum + ahead, slice_length);
      }
    }
    // Pass 1: the row's two sums.
    constexpr int kSumsBatch = kAhead ? kSliceSumsBatch : kSliceBatch;
    State sums{M(0), M(0)};
    for (int64_t first = threadIdx.x; first < slice_packs; first += kSliceThreads * kSumsBatch) {
      Raw<T, kPack> x[kSumsBatch], dy[kSumsBatch];
#pragma unroll
      for (int b = 0; b < kSumsBatch; ++b) {
        const int64_t p = first + b * kSliceThreads;
        x[b] = load_raw<T, kPack>(a.x + offset + p * kPack, p < slice_packs);
        dy[b] = load_raw<T, kPack>(a.dy + offset + p * kPack, p < slice_packs);
      }
#pragma unroll
      for (int b = 0; b < kSumsBatch; ++b) {
        const int64_t p = first + b * kSliceThreads;
        if (p < slice_packs) {
          const Raw<W, kPack> w = weight_at(p);
#pragma unroll
          for (int j = 0; j < kPack; ++j) {
            const M g = product(value_of<M>(dy[b], j), value_of<M>(w, j));
            sums.g += g;
            sums.g_xhat += g * (value_of<M>(x[b], j) - mean);
          }
        }
      }
    }
    sums = row_allreduce<kSliceThreads>(sums, AddGradSums(), scratch, cluster);
    const M mean_g = kCentered ? sums.g * inv_cols : M(0);
    const M mean_g_xhat = sums.g_xhat * rstd * inv_cols;
    // Pass 2: dx, and the column sums (each pack's slots are its thread's alone).
    for (int64_t first = threadIdx.x; first < slice_packs; first += kSliceThreads * kSliceBatch) {
      Raw<T, kPack> x[kSliceBatch], dy[kSliceBatch];
      [[maybe_unused]] Raw<T, kPack> dsum[kResidual ? kSliceBatch : 1];
#pragma unroll
      for (int b = 0; b < kSliceBatch; ++b) {
        const int64_t p = first + b * kSliceThreads;
        x[b] = load_raw<T, kPack>(a.x + offset + p * kPack, p < slice_packs);
        dy[b] = load_raw<T, kPack>(a.dy + offset + p * kPack, p < slice_packs);
        if constexpr (kResidual)
          dsum[b] = load_raw<T, kPack>(a.dsum + offset + p * kPack, p < slice_packs && has_dsum);
      }
#pragma unroll
      for (int b = 0; b < kSliceBatch; ++b) {
        const int64_t p = first + b * kSliceThreads;
        if (p < slice_packs) {
          const Raw<W, kPack> w = weight_at(p);
          M out[kPack];
          M dy_xhat[kPack];
          M dy_values[kPack];
#pragma unroll
          for (int j = 0; j < kPack; ++j) {
            const M dy_j = value_of<M>(dy[b], j);
            const M xhat = (value_of<M>(x[b], j) - mean) * rstd;
            M dx = rstd * (product(dy_j, value_of<M>(w, j)) - mean_g - xhat * mean_g_xhat);
            if constexpr (kResidual) {
              if (has_dsum) dx += value_of<M>(dsum[b], j);
            }
            out[j] = dx;
            dy_xhat[j] = dy_j * xhat;
            dy_values[j] = dy_j;
          }
          store_pack_global<T, kPack>(a.dx + offset + p * kPack, narrow<T>(out));
#pragma unroll
          for (int q = 0; q < kPack; q += kVec) {
            M* at = dweight + p * kPack + q;
            Pack<M, kVec> total = load_pack<M, kVec>(at);
#pragma unroll
            for (int i = 0; i < kVec; ++i) total.elem[i] += dy_xhat[q + i];
            store_pack<M, kVec>(at, total);
            if constexpr (kCentered) {
              at = dbias + p * kPack + q;
              total = load_pack<M, kVec>(at);
#pragma unroll
              for (int i = 0; i < kVec; ++i) total.elem[i] += dy_values[q + i];
              store_pack<M, kVec>(at, total);
            }
          }
        }
      }
    }
    cluster.end_row();
  }
  cluster.close();
  // The cluster's partial row: this block's slice of it.
  __syncthreads();
  for (int64_t c = threadIdx.x; c < slice_length; c += kSliceThreads) {
    const int64_t at = group * a.cols + slice_begin + c;
    if (a.partial_dweight != nullptr) a.partial_dweight[at] = dweight[c];
    if constexpr (kCentered) {
      if (a.partial_dbias != nullptr) a.partial_dbias[at] = dbias[c];
    }
  }
}

// ---- Host side: the plan of a call. ----

// Values a thread holds. On the 16-byte path, 8 packs forward (128 bytes of x in flight a thread,
// 32 float32 or 64 bfloat16 values, held as loaded: see Raw) and 2 backward, which holds x, dy,
// the next row's x and dy (loaded ahead), the weight and two float accumulators a value (the
// float32 backward took 106 registers a thread at 16 values with no loads ahead, one block of 512
// threads an SM). The one-value path (odd row lengths, offset views, double) is correct, not
// tuned: 2 to 32 values forward, up to 8 backward.
// A forward with a residual reads two tensors, and holds 4 packs of each.
template <bool kBackward, int kPack, int kInputs>
constexpr int kColsPerThreadMin = kPack == 1 ? 2 : (kBackward ? 2 : 8 / kInputs) * kPack;

template <bool kBackward, int kPack, int kInputs>
constexpr int kColsPerThreadMax = kPack == 1 ? (kBackward ? 8 : kRegisterRowColsPerThread)
                                             : (kBackward ? kBackwardPacks : 8 / kInputs) * kPack;

// double runs one value a thread step on at most 128 threads a row: correct, not tuned.
template <typename T>
constexpr int kRowThreadsMax = std::is_same_v<T, double> ? 128 : kMaxRowThreads;

// The longest row in one block's registers: forward 16384 float32 or 32768 bfloat16 values,
// backward 4096 or 8192; clusters of up to 16 blocks hold 16 times that.
template <typename T, bool kBackward, int kPack, int kInputs>
constexpr int64_t kRegisterCols =
    int64_t{kRowThreadsMax<T>} * kColsPerThreadMax<kBackward, kPack, kInputs>;

struct Launch {
  int64_t blocks;
  int cluster_blocks;
  int64_t slice_cols;
  int block_threads;
  size_t smem_bytes = 0;  // dynamic shared memory a block
};

// Launches `kernel` on a grid of launch.blocks blocks, clusters of launch.cluster_blocks.
template <typename Kernel, typename Args>
void launch_grid(Kernel kernel, const Launch& launch, cudaStream_t stream, const Args& args) {
  row_engine::SlicePlan plan{launch.cluster_blocks, launch.slice_cols, launch.smem_bytes};
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

// Opts `kKernel` in to all the dynamic shared memory a block may have (past 48 KB a kernel must
// ask), once per device; returns that many bytes. Each launch still asks only for its own.
template <auto kKernel>
size_t allow_smem() {
  static std::atomic<size_t> allowed[kMaxDevices] = {};
  const int device = c10::cuda::current_device();
  size_t bytes = device < kMaxDevices ? allowed[device].load(std::memory_order_relaxed) : 0;
  if (bytes == 0) {
    cudaFuncAttributes attributes;
    C10_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kKernel));
    int optin = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    bytes = optin - attributes.sharedSizeBytes;
    C10_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
    if (device < kMaxDevices) allowed[device].store(bytes, std::memory_order_relaxed);
  }
  return bytes;
}

// Blocks of kKernel the GPU holds at once (with smem_bytes of dynamic shared memory each), at
// most `needed`.
template <auto kKernel>
int64_t resident_blocks(int block_threads, size_t smem_bytes, int64_t needed) {
  const int64_t resident = int64_t{blocks_per_multiprocessor<kKernel>(block_threads, smem_bytes)} *
                           multiprocessor_count();
  return std::clamp<int64_t>(needed, 1, resident);
}

// The smallest cluster (`fewest_blocks`, 1 or 2, to 16 blocks) whose register slices of
// `block_cols` hold a row of `cols`, if the kernel has cluster code and the GPU can schedule one;
// 0 if none.
template <auto kKernel>
int cluster_for(int64_t cols, int64_t block_cols, int block_threads, size_t smem_bytes = 0,
                int fewest_blocks = 2) {
  if (cols > block_cols * kMaxClusterBlocks || !has_clusters<kKernel>()) return 0;
  int blocks = fewest_blocks;
  while (block_cols * blocks < cols) blocks *= 2;
  const row_engine::SlicePlan plan{blocks, 0, smem_bytes};
  return row_engine::schedulable(kKernel, plan, block_threads) ? blocks : 0;
}

// Clusters of `cluster_blocks` blocks of kKernel the GPU holds at once (0: none), asked once per
// device and cluster size. A cluster's blocks share one GPC, so this is fewer than the SMs'
// block slots divided by the cluster size wherever a GPC's slots are not a multiple of it; a
// looping grid sized by that division left clusters waiting for a second wave, each of which
// then did a full share of the rows. A cluster of one block is no cluster: the SMs' block slots.
template <auto kKernel>
int64_t active_clusters(int cluster_blocks, int block_threads, size_t smem_bytes) {
  if (cluster_blocks == 1) {
    return int64_t{blocks_per_multiprocessor<kKernel>(block_threads, smem_bytes)} *
           multiprocessor_count();
  }
  static std::atomic<int> known[kMaxDevices][4] = {};  // cluster sizes 2, 4, 8, 16; 0 unknown
  const int device = c10::cuda::current_device();
  int size_index = 0;
  while ((2 << size_index) < cluster_blocks && size_index < 3) ++size_index;
  int clusters =
      device < kMaxDevices ? known[device][size_index].load(std::memory_order_relaxed) : 0;
  if (clusters == 0) {
    cudaLaunchAttribute cluster_dims;
    const row_engine::SlicePlan plan{cluster_blocks, 0, smem_bytes};
    const cudaLaunchConfig_t config =
        row_engine::slices_config(plan, block_threads, cluster_blocks, nullptr, cluster_dims);
    if (cudaOccupancyMaxActiveClusters(&clusters, kKernel, &config) != cudaSuccess) {
      (void)cudaGetLastError();  // a "no", not an error for the next launch check
      clusters = 0;
    }
    if (device < kMaxDevices && clusters > 0)
      known[device][size_index].store(clusters, std::memory_order_relaxed);
  }
  return clusters;
}

template <int N>
using IntConstant = std::integral_constant<int, N>;

// Calls f(kColsPerThread, kThreadsPerRow) for the smallest register-row kernel holding `cols`,
// as the row engine's launch_warp_rows sizes its kernels: capacities from kColsPerThreadMin,
// times 2 on the 16-byte path (4 on the one-value path, correct but not tuned), narrow rows
// sharing a warp, wider ones more values a thread up to kColsPerThreadMax, then more threads.
template <typename T, bool kBackward, int kPack, int kInputs,
          int kCapacity = std::max(kColsPerThreadMin<kBackward, kPack, kInputs>, 4), typename F>
void with_register_shape(int64_t cols, F&& f) {
  constexpr int64_t kMax = kRegisterCols<T, kBackward, kPack, kInputs>;
  static_assert(kMax % kCapacity == 0, "capacities grow to the maximum");
  if constexpr (kCapacity < kMax) {
    if (cols > kCapacity) {
      constexpr int kNext = static_cast<int>(
          std::min<int64_t>(kMax, int64_t{row_engine::kCapacityStep<kPack>} * kCapacity));
      with_register_shape<T, kBackward, kPack, kInputs, kNext>(cols, std::forward<F>(f));
      return;
    }
  }
  constexpr int kWide =
      std::clamp(kCapacity / kWarpSize, kColsPerThreadMin<kBackward, kPack, kInputs>,
                 kColsPerThreadMax<kBackward, kPack, kInputs>);
  // Forward rows of 16-byte packs get 8 threads at least, so that each load instruction reads
  // 128 contiguous bytes of a row (a whole cache line): bfloat16 rows of 128 held by 2 threads of
  // 8 packs each (32 bytes of a row an instruction) measured 55% of copy on an H200, against 78%
  // with 8 threads of 2 packs.
  constexpr int kColsPerThread =
      !kBackward && kPack > 1 ? std::max(kPack, std::min(kWide, kCapacity / 8)) : kWide;
  f(IntConstant<kColsPerThread>(), IntConstant<kCapacity / kColsPerThread>());
}

// Packs of each input a thread of a cluster holds in the forward with a residual: 8, as a plain
// row's, where the register rows hold 4 (float32: 64 registers a thread, none spilled; bfloat16
// spills 36 bytes, none at 4: nvcc 13.0, sm_90a). At 4 (merged main 0b448ef) float32 rows past
// 131072 took the long-row kernel and rows of 131072 a cluster of 16. H200, the forward alone
// (2026-11-25d, 512 MiB inputs), 4 -> 8: add_layernorm float32 rows of 131072 915 -> 629 us, 262144
// 1355 -> 828 (then 693 with kWideClusterThreads), bfloat16 262144 858 -> 685; add_rmsnorm float32
// 262144 1067 -> 696; rows of 32768-65536 2-7% faster but add_layernorm bfloat16 65536 (618 -> 638
// us). 16-bit rows that one block holds at 8 packs keep 4 (see launch_forward_with).
constexpr int kClusterResidualPacks = 8;

// forward_rows_kernel over clusters of blocks of kBlockThreads, each thread holding
// kColsPerThread values of a row, on the smallest cluster that holds a row, if any does; false
// if none. The one place that decides whether the kernel keeps the bias in shared memory
// (forward_staged_bias), for the kernel and for the bytes its blocks get.
template <typename T, typename W, bool kCentered, bool kResidual, int kPack, int kColsPerThread,
          int kBlockThreads, bool kPushes = kForwardClusterPushes<T, kCentered>,
          int kFewestBlocks = 2>
bool launch_forward_over_clusters(const ForwardArgs<T, W>& a, cudaStream_t stream) {
  constexpr bool kBiasStaged =
      forward_staged_bias<T, W, kCentered, kPack, kBlockThreads, kColsPerThread>();
  constexpr auto kernel = forward_rows_kernel<T, W, kCentered, kResidual, kPack, kColsPerThread,
                                              kBlockThreads, kPushes, kBiasStaged>;
  constexpr int64_t kBlockCols = int64_t{kBlockThreads} * kColsPerThread;
  constexpr size_t kSmemBytes = kBiasStaged ? size_t{kBlockCols} * sizeof(W) : 0;
  if (kSmemBytes > 0 && allow_smem<kernel>() < kSmemBytes) return false;
  const int cluster =
      cluster_for<kernel>(a.cols, kBlockCols, kBlockThreads, kSmemBytes, kFewestBlocks);
  if (cluster == 0) return false;
  const int64_t slice_cols = ceil_div(ceil_div(a.cols, cluster), kPack) * kPack;
  // As many clusters as the GPU holds at once, each looping over rows, rather than a cluster a
  // row: LayerNorm's forward on an H200 (2026-11-25, 512 MiB inputs) took bfloat16 rows of 131072
  // 394 -> 349 us, float32 rows of 65536 360 -> 329 us, 32768 332 -> 319 us (rows of 32768
  // bfloat16, and add_rmsnorm's at 32768, within the runs' spread).
  const int64_t resident = active_clusters<kernel>(cluster, kBlockThreads, kSmemBytes);
  const int64_t clusters =
      std::clamp<int64_t>(resident > 0 ? resident : a.rows, 1,
                          std::min<int64_t>(a.rows, std::numeric_limits<int>::max() / cluster));
  launch_grid(kernel, Launch{clusters * cluster, cluster, slice_cols, kBlockThreads, kSmemBytes},
              stream, a);
  return true;
}

// y = norm(x) * weight + bias for every row, and the rows' statistics; see ForwardArgs.
template <typename T, typename W, bool kCentered, bool kResidual, int kPack>
void launch_forward_with(const ForwardArgs<T, W>& a, cudaStream_t stream) {
  constexpr int kInputs = kResidual ? 2 : 1;
  if (a.cols <= kRegisterCols<T, false, kPack, kInputs>) {
    with_register_shape<T, false, kPack, kInputs>(a.cols, [&](auto cols_per_thread,
                                                              auto threads_per_row) {
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
    constexpr int kColsPerThread =
        kResidual ? kClusterResidualPacks * kPack : kColsPerThreadMax<false, kPack, kInputs>;
    constexpr int64_t kBlockCols = int64_t{kMaxRowThreads} * kColsPerThread;
    if constexpr (kResidual && sizeof(T) < 4) {
      // 16-bit rows with a residual that one block would hold at kClusterResidualPacks (which
      // spills there) take clusters of 2 at 4 packs a thread, none spilled (main's path before
      // kClusterResidualPacks). The sweep of 6140aa3 (2026-11-25d), rows of 32768 bfloat16,
      // forward: add_layernorm 81% of copy at 4 packs (0b448ef), 62% at 8; add_rmsnorm 84, 79.
      // From 65536 up the 8 packs' smaller clusters pay: add_rmsnorm 83 -> 89 at 65536.
      constexpr int kUnspilledCols = kColsPerThreadMax<false, kPack, kInputs>;
      if (a.cols <= kBlockCols &&
          launch_forward_over_clusters<T, W, kCentered, kResidual, kPack, kUnspilledCols,
                                       kMaxRowThreads>(a, stream))
        return;
    }
    if constexpr (kWideClusterThreads > 0) {
      // Rows one wider block holds, which a cluster of 2 would take: that block, no cluster
      // (kForwardWideBlock; the wide clusters' kernel, whose pushes a cluster of 1 never makes).
      if constexpr (kForwardWideBlock<T, kCentered, kResidual>) {
        constexpr int64_t kWideBlockCols = int64_t{kWideClusterThreads} * kColsPerThread;
        constexpr bool kPushes = kForwardWideClusterPushes;
        if (a.cols <= kWideBlockCols &&
            launch_forward_over_clusters<T, W, kCentered, kResidual, kPack, kColsPerThread,
                                         kWideClusterThreads, kPushes, 1>(a, stream))
          return;
      }
      // Rows a cluster of 16 would take: a cluster of 8 wider blocks (kWideClusterThreads).
      if (takes_sixteen_blocks(a.cols, kBlockCols) &&
          launch_forward_over_clusters<T, W, kCentered, kResidual, kPack, kColsPerThread,
                                       kWideClusterThreads, kForwardWideClusterPushes>(a, stream))
        return;
    }
    if (launch_forward_over_clusters<T, W, kCentered, kResidual, kPack, kColsPerThread,
                                     kMaxRowThreads>(a, stream))
      return;
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

// How backward_slices_kernel takes rows of some length: clusters of cluster_blocks blocks, each
// owning slice_cols columns with smem_bytes of column sums, `clusters` of them at once on the GPU
// (0: none fits).
struct SlicesPlan {
  int cluster_blocks;
  int64_t slice_cols;
  size_t smem_bytes;
  int64_t clusters;
};

// Column sums a block of backward_slices_kernel aims to stay within: two blocks an SM.
constexpr size_t kSliceSumsTargetBytes = 96 * 1024;

// The fewest cluster blocks (a power of two up to 16) whose slices' sums stay within the target,
// else the most blocks whose sums fit at all; remembered per device and row length, as the row
// engine's plans are (the occupancy queries take microseconds).
template <auto kKernel, typename M, bool kCentered, int kPack>
SlicesPlan plan_backward_slices(int64_t cols) {
  constexpr size_t kMaxPlans = 64;
  static std::mutex mutex;
  static std::unordered_map<int64_t, SlicesPlan> plans[kMaxDevices];
  const int device = c10::cuda::current_device();
  const std::lock_guard<std::mutex> lock(mutex);
  if (device < kMaxDevices) {
    if (const auto known = plans[device].find(cols); known != plans[device].end())
      return known->second;
  }
  SlicesPlan chosen{0, 0, 0, 0};
  if (has_clusters<kKernel>()) {
    const size_t max_bytes = allow_smem<kKernel>();
    const auto plan_for = [&](int blocks) {
      const int64_t slice_cols = ceil_div(ceil_div(cols, blocks), kPack) * kPack;
      return SlicesPlan{blocks, slice_cols,
                        static_cast<size_t>(kSumArrays<kCentered> * slice_cols) * sizeof(M), 0};
    };
    const auto resident = [&](SlicesPlan plan) {
      cudaLaunchAttribute cluster_dims;
      const row_engine::SlicePlan slices{plan.cluster_blocks, plan.slice_cols, plan.smem_bytes};
      const cudaLaunchConfig_t config = row_engine::slices_config(
          slices, kSliceThreads, plan.cluster_blocks, nullptr, cluster_dims);
      int clusters = 0;
      if (cudaOccupancyMaxActiveClusters(&clusters, kKernel, &config) != cudaSuccess) {
        (void)cudaGetLastError();  // a "no", not an error for the next launch check
        clusters = 0;
      }
      plan.clusters = clusters;
      return plan;
    };
    for (int blocks = 2; blocks <= kMaxClusterBlocks && chosen.clusters == 0; blocks *= 2) {
      const SlicesPlan plan = plan_for(blocks);
      if (plan.smem_bytes <= kSliceSumsTargetBytes) chosen = resident(plan);
    }
    for (int blocks = kMaxClusterBlocks; blocks >= 2 && chosen.clusters == 0; blocks /= 2) {
      const SlicesPlan plan = plan_for(blocks);
      if (plan.smem_bytes <= max_bytes) chosen = resident(plan);
    }
  }
  if (device < kMaxDevices) {
    if (plans[device].size() >= kMaxPlans) plans[device].clear();
    plans[device][cols] = chosen;
  }
  return chosen;
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
  if (a.cols <= kRegisterCols<T, true, kPack, 1>) {
    int64_t partials = 0;
    with_register_shape<T, true, kPack, 1>(a.cols, [&](auto cols_per_thread, auto threads_per_row) {
      constexpr int kThreadsPerRow = decltype(threads_per_row)::value;
      constexpr auto kernel =
          backward_rows_kernel<T, W, kCentered, kResidual, kPack, decltype(cols_per_thread)::value,
                               kThreadsPerRow>;
      constexpr int kBlockThreads = block_threads_for<kThreadsPerRow>();
      constexpr size_t kSmem =
          backward_smem_bytes<M, W, kCentered, kBlockThreads, decltype(cols_per_thread)::value>();
      allow_smem<kernel>();
      // As many blocks as the GPU holds at once, each looping over rows: each writes one partial
      // row of the gradients, so their number bounds the second pass's work.
      partials = resident_blocks<kernel>(kBlockThreads, kSmem,
                                         ceil_div(a.rows, kBlockThreads / kThreadsPerRow));
      const Partials<M> made = make_partials(partials, false);
      a.partial_dweight = made.dweight;
      a.partial_dbias = made.dbias;
      launch_grid(kernel, Launch{partials, 1, a.cols, kBlockThreads, kSmem}, stream, a);
    });
    return partials;
  }
  if constexpr (kPack > 1) {
    // Up to 16 blocks' registers in a cluster on sm_90: the row is read from DRAM once. Returns
    // the partial rows written, 0 where no cluster of kBlockThreads-thread blocks holds the row.
    constexpr int kPackedCols = kColsPerThreadMax<true, kPack, 1>;
    const auto launch_cluster = [&](auto block_threads, auto cols_per_thread) -> int64_t {
      constexpr int kBlockThreads = decltype(block_threads)::value;
      constexpr int kColsPerThread = decltype(cols_per_thread)::value;
      constexpr auto kernel =
          backward_rows_kernel<T, W, kCentered, kResidual, kPack, kColsPerThread, kBlockThreads>;
      constexpr size_t kSmem =
          backward_smem_bytes<M, W, kCentered, kBlockThreads, kColsPerThread>();
      allow_smem<kernel>();
      const int cluster = cluster_for<kernel>(a.cols, int64_t{kBlockThreads} * kColsPerThread,
                                              kBlockThreads, kSmem);
      if (cluster == 0) return 0;
      const int64_t slice_cols = ceil_div(ceil_div(a.cols, cluster), kPack) * kPack;
      // Clusters the GPU holds at once, each looping over rows.
      const int64_t resident = active_clusters<kernel>(cluster, kBlockThreads, kSmem);
      if (resident == 0) return 0;
      const int64_t partials = std::min<int64_t>(resident, a.rows);
      const Partials<M> made = make_partials(partials, false);
      a.partial_dweight = made.dweight;
      a.partial_dbias = made.dbias;
      launch_grid(kernel, Launch{partials * cluster, cluster, slice_cols, kBlockThreads, kSmem},
                  stream, a);
      return partials;
    };
    if constexpr (kWideBackwardClusterThreads > 0) {
      // Past 8 narrow blocks, up to 16 wide ones.
      constexpr int64_t kWideCols = int64_t{kWideBackwardClusterThreads} * kPackedCols;
      if (a.cols > kRegisterCols<T, true, kPack, 1> * (kMaxClusterBlocks / 2) &&
          a.cols <= kWideCols * kMaxClusterBlocks) {
        const int64_t partials =
            launch_cluster(IntConstant<kWideBackwardClusterThreads>(), IntConstant<kPackedCols>());
        if (partials > 0) return partials;
      }
    }
    const int64_t partials =
        launch_cluster(IntConstant<kMaxRowThreads>(), IntConstant<kPackedCols>());
    if (partials > 0) return partials;
    if constexpr (kDeepBackwardClusters && kWideBackwardClusterThreads > 0 && sizeof(T) == 4 &&
                  !(kCentered && kResidual)) {
      const int64_t deep = launch_cluster(IntConstant<kWideBackwardClusterThreads>(),
                                          IntConstant<2 * kPackedCols>());
      if (deep > 0) return deep;
    }
  }
  if constexpr (kPack > 1) {
    // The slices kernel; 0 where no plan fits.
    const auto launch_slices = [&](auto ahead) -> int64_t {
      constexpr auto kernel =
          backward_slices_kernel<T, W, kCentered, kResidual, kPack, decltype(ahead)::value>;
      const SlicesPlan plan = plan_backward_slices<kernel, M, kCentered, kPack>(a.cols);
      if (plan.clusters == 0) return 0;
      const int64_t partials = std::min<int64_t>(plan.clusters, a.rows);
      const Partials<M> made = make_partials(partials, false);
      a.partial_dweight = made.dweight;
      a.partial_dbias = made.dbias;
      launch_grid(kernel,
                  Launch{partials * plan.cluster_blocks, plan.cluster_blocks, plan.slice_cols,
                         kSliceThreads, plan.smem_bytes},
                  stream, a);
      return partials;
    };
    // The kernel that loads ahead (kSlicePrefetch), but for float32 where the sums of a block
    // stay past the planner's two-blocks target (rows of 262144: one block an SM), where it
    // measured slower than the one that does not.
    constexpr auto kAheadKernel = backward_slices_kernel<T, W, kCentered, kResidual, kPack, true>;
    const bool wide_sums =
        plan_backward_slices<kAheadKernel, M, kCentered, kPack>(a.cols).smem_bytes >
        kSliceSumsTargetBytes;
    const int64_t partials = sizeof(T) >= 4 && wide_sums ? launch_slices(std::false_type{})
                                                         : launch_slices(std::true_type{});
    if (partials > 0) return partials;
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
// rows it wrote (make_partials(count, zeroed) makes them), for reduce.cuh's sum_partials to add.
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
