// The row engine: the CUDA kernels of every op that reduces each row of a tensor to a small
// State, then writes each element of the row from its inputs and that State (softmax, a row
// minus its mean, norms, and their backwards). An op supplies its math as a functor; the engine
// supplies the kernels by row length, the planner that picks one, 16-byte loads, the row held on
// chip between the reduction and the output pass (so each input is read from DRAM once), and
// clusters of blocks on sm_90. These ops do a few flops per byte, so every kernel is built to
// stream. They began as softmax's kernels: the H200 figures quoted beside the constants are
// softmax's (`opgen bench softmax`), and docs/benchmarks/softmax-long-rows.md holds their history.
//
// A row op `Fn`, over its math type M (at::opmath_type of the dtype: float for half and
// bfloat16), has:
//   kInputs          the tensors read per element (x; or y and dy), in the order the launch
//                    passes them. The output is one tensor of the inputs' shape.
//   State            what a row reduces to: M, or a trivially copyable struct of 32-bit words.
//   Combine          a functor, Combine()(State, State) -> State: associative and commutative
//                    enough that the engine may combine in any order (rows split over lanes,
//                    warps and blocks do).
//   identity()       the State that Combine leaves unchanged.
//   transform(x...)  the State of one element, from its kInputs values.
//   kPadding         an M whose transform is identity() (0 for a sum, -inf for a max): slots past
//                    a row's end hold it in every input.
//   output(state, row_length)  what each output of the row needs from its State (the mean of a
//                    sum, the reciprocal of a sum of exps), once a row: a functor whose
//                    operator()(x...) -> M is one output element from its inputs' values.
// and may add, where a batch of values reduces more cheaply than element by element:
//   reduce(v) -> State, for `const M (&v)[kInputs][N]` (v[k][i]: input k of element i): the State
//                    of N elements, in place of the fold of transform and Combine.
//   reduce_in_registers(v, row_length, allreduce) -> an output functor, for `M (&v)[kInputs][N]`:
//                    rows of up to kRegisterRowMaxCols are held in registers whole, so an op can
//                    reduce them in several passes: `allreduce(value, combine, identity)` reduces
//                    a value of up to 16 bytes over the row, and every thread may rewrite its v,
//                    to which the returned functor is then applied (softmax: the row's max, then
//                    exps in place and their sum).
// All functions are __device__ and static. launch_row_op runs an op over rows, launch_slab_op along
// any dimension.
#pragma once

#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "opgen/launch.cuh"
#include "opgen/mbarrier.cuh"
#include "opgen/reduce.cuh"
#include "opgen/slabs.h"
#include "opgen/vec.cuh"

namespace opgen {
namespace row_engine {

template <typename Fn, typename T>
using Inputs = InputPointers<T, Fn::kInputs>;

// ---- An op's functors, as the kernels call them. ----

// f(v[0][i], v[1][i], ...): element i of every input.
template <typename F, typename M, int kInputs, int N, std::size_t... k>
__device__ __forceinline__ auto at_element(const F& f, const M (&v)[kInputs][N], int i,
                                           std::index_sequence<k...>) {
  return f(v[k][i]...);
}

template <typename F, typename M, int kInputs, int N>
__device__ __forceinline__ auto at_element(const F& f, const M (&v)[kInputs][N], int i) {
  return at_element(f, v, i, std::make_index_sequence<kInputs>());
}

// Whether Fn has its own reduce(v) for batches of N (detected, as elementwise.cuh's
// kPacksPerThread is: an op states only what it changes).
template <typename Fn, typename Values, typename = void>
struct HasBatchReduce : std::false_type {};

template <typename Fn, typename Values>
struct HasBatchReduce<Fn, Values, std::void_t<decltype(Fn::reduce(std::declval<const Values&>()))>>
    : std::true_type {};

// Whether Fn has its own reduce_in_registers for rows of Values in registers.
template <typename Fn, typename Values, typename AllReduce>
using RegisterReduceOutput = decltype(Fn::reduce_in_registers(std::declval<Values&>(), int64_t{0},
                                                              std::declval<const AllReduce&>()));

template <typename Fn, typename Values, typename AllReduce, typename = void>
struct HasRegisterReduce : std::false_type {};

template <typename Fn, typename Values, typename AllReduce>
struct HasRegisterReduce<Fn, Values, AllReduce,
                         std::void_t<RegisterReduceOutput<Fn, Values, AllReduce>>>
    : std::true_type {};

// The State of N elements of each input: Fn::reduce where the op has one, else each element's
// transform combined in order.
template <typename Fn, typename M, int N>
__device__ __forceinline__ typename Fn::State reduce_values(const M (&v)[Fn::kInputs][N]) {
  if constexpr (HasBatchReduce<Fn, M[Fn::kInputs][N]>::value) {
    return Fn::reduce(v);
  } else {
    const typename Fn::Combine combine;
    const auto transform = [](auto... x) {
      return Fn::transform(x...);
    };
    typename Fn::State state = Fn::identity();
#pragma unroll
    for (int i = 0; i < N; ++i) state = combine(state, at_element(transform, v, i));
    return state;
  }
}

// Second argument of __launch_bounds__: 0 leaves ptxas its own register budget, right for float
// math; libdevice's double exp is long enough to spill under it, and 1 block an SM lets the
// double kernels (correct, not tuned) take the registers they need.
template <typename T>
constexpr int kMinBlocksPerSm = std::is_same_v<T, double> ? 1 : 0;

// ---- Rows of up to kRegisterRowMaxCols: a few lanes, a warp or a whole block per row, in
// registers. ----

// Blocks of 128 threads hold several rows, or one row of up to kMaxRowThreads threads.
constexpr int kWarpRowBlockThreads = 128;
constexpr int kMaxRowThreads = 512;
// 32 values a lane (64 for two inputs) stay clear of spilling; see launch_rows for the lengths.
constexpr int kRegisterRowColsPerThread = 32;
// 16384; double stops at 128 threads' worth, 4096, as 512 threads of 64 doubles spill.
template <typename T>
constexpr int kRegisterRowMaxCols =
    (std::is_same_v<T, double> ? kWarpRowBlockThreads : kMaxRowThreads) * kRegisterRowColsPerThread;

constexpr int warp_rows_block_threads(int threads_per_row) {
  return std::max(kWarpRowBlockThreads, threads_per_row);
}

// One exchange slot a warp for rows that span warps: it holds an op's State, or the values of up
// to 16 bytes that a reduce_in_registers reduces.
template <typename Fn>
constexpr int kExchangeSlotBytes = std::max<int>(16, sizeof(typename Fn::State));

// Thread `lane` of kThreadsPerRow holds packs lane, lane + kThreadsPerRow, ... of a span of
// `length` values at `offset` in each input: each load instruction of the span's threads covers
// one contiguous stretch of it, and a thread's valid packs come first. Slots past the span get
// Fn::kPadding.
template <typename Fn, typename T, int kPack, int kThreadsPerRow, typename M, int kColsPerThread>
__device__ __forceinline__ void load_span(M (&v)[Fn::kInputs][kColsPerThread],
                                          const Inputs<Fn, T>& in, int64_t offset, int64_t length,
                                          int lane) {
#pragma unroll
  for (int p = 0; p < kColsPerThread / kPack; ++p) {
    const int col = (p * kThreadsPerRow + lane) * kPack;
#pragma unroll
    for (int k = 0; k < Fn::kInputs; ++k) {
      if (col < length) {
        const auto pack = load_pack<T, kPack>(in.ptr[k] + offset + col);
#pragma unroll
        for (int j = 0; j < kPack; ++j) v[k][p * kPack + j] = widen<M>(pack, j);
      } else {
#pragma unroll
        for (int j = 0; j < kPack; ++j) v[k][p * kPack + j] = Fn::kPadding;
      }
    }
  }
}

// Writes output(element i) for the values load_span gave thread `lane`, when `valid`.
template <typename T, int kPack, int kThreadsPerRow, typename M, int kInputs, int kColsPerThread,
          typename Output>
__device__ __forceinline__ void store_span(T* out, int64_t offset, int64_t length, int lane,
                                           bool valid, const M (&v)[kInputs][kColsPerThread],
                                           const Output& output) {
#pragma unroll
  for (int p = 0; p < kColsPerThread / kPack; ++p) {
    const int col = (p * kThreadsPerRow + lane) * kPack;
    if (valid && col < length) {
      Pack<T, kPack> pack;
#pragma unroll
      for (int j = 0; j < kPack; ++j)
        pack.elem[j] = static_cast<T>(at_element(output, v, p * kPack + j));
      store_pack<T, kPack>(out + offset + col, pack);
    }
  }
}

// kThreadsPerRow consecutive threads per row: several rows a warp, a warp, or several warps,
// each holding its part of the row as load_span lays it out.
template <typename Fn, typename T, int kPack, int kColsPerThread, int kThreadsPerRow>
__global__ void __launch_bounds__(warp_rows_block_threads(kThreadsPerRow), kMinBlocksPerSm<T>)
    warp_rows_kernel(T* __restrict__ out, Inputs<Fn, T> in, int64_t rows, int64_t cols) {
  constexpr int kBlockThreads = warp_rows_block_threads(kThreadsPerRow);
  static_assert(kPack >= 1 && kColsPerThread % kPack == 0, "a thread holds whole packs");
  static_assert(kColsPerThread <= kRegisterRowColsPerThread, "more would spill");
  static_assert(kThreadsPerRow >= 1 && kThreadsPerRow <= kMaxRowThreads &&
                    (kThreadsPerRow & (kThreadsPerRow - 1)) == 0,
                "rows split a block into power-of-two groups: lanes of a warp, or whole warps");
  static_assert(kBlockThreads % kWarpSize == 0, "blocks are whole warps");
  using M = at::opmath_type<T>;
  constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  constexpr int kSlotBytes = kExchangeSlotBytes<Fn>;
  __shared__ __align__(16) unsigned char exchange[kBlockThreads / kWarpSize * kSlotBytes];
  // Reduces one value over the row's threads; every thread of the row gets the result.
  const auto allreduce = [&](auto value, auto combine, auto identity) {
    using Value = decltype(value);
    static_assert(sizeof(Value) <= kSlotBytes && alignof(Value) <= 16, "a value fits its slot");
    return group_allreduce_with<kThreadsPerRow>(value, combine, static_cast<Value>(identity),
                                                reinterpret_cast<Value*>(exchange));
  };
  const int lane = threadIdx.x % kThreadsPerRow;
  const int row_in_block = threadIdx.x / kThreadsPerRow;
  // The whole block steps together, so every thread reaches the shuffles and barriers, past the
  // last row too.
  for (int64_t first_row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock; first_row < rows;
       first_row += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    // Threads past the last row redo the last row and store nothing: a loop-wide row test on
    // every load costs the unaligned (one value a load) kernels registers, then spills.
    const bool row_valid = first_row + row_in_block < rows;
    const int64_t offset = min(first_row + row_in_block, rows - 1) * cols;
    M v[Fn::kInputs][kColsPerThread];
    load_span<Fn, T, kPack, kThreadsPerRow>(v, in, offset, cols, lane);
    const auto store = [&](const auto& output) {
      store_span<T, kPack, kThreadsPerRow>(out, offset, cols, lane, row_valid, v, output);
    };
    if constexpr (HasRegisterReduce<Fn, M[Fn::kInputs][kColsPerThread],
                                    decltype(allreduce)>::value) {
      store(Fn::reduce_in_registers(v, cols, allreduce));
    } else {
      store(Fn::output(allreduce(reduce_values<Fn>(v), typename Fn::Combine(), Fn::identity()),
                       cols));
    }
  }
}

// ---- Clusters: blocks on several SMs that share one row's reduction (sm_90). ----

// 16 is Hopper's largest (non-portable) cluster; one lane per block in cluster_allreduce.
constexpr int kMaxClusterBlocks = 16;
static_assert(kMaxClusterBlocks <= kWarpSize, "cluster_allreduce reads one block per lane");

// Whether Fn's Combine leaves a State merged with itself unchanged (Combine::kIdempotent): then
// the lanes past a cluster's blocks read the blocks again instead of Fn::identity().
template <typename Fn, typename = void>
struct Idempotent : std::false_type {};
template <typename Fn>
struct Idempotent<Fn, std::void_t<decltype(Fn::Combine::kIdempotent)>>
    : std::bool_constant<Fn::Combine::kIdempotent> {};

// Combines the States of a cluster's blocks, block b's as state_of(b), in every warp: the same
// order everywhere, so every block of the cluster gets the same bits. An idempotent Combine
// (Idempotent) merges copies where the lanes outnumber the blocks: for clusters of a power of two
// blocks the butterfly then merges only blocks, each with a distinct one or itself.
template <typename Fn, typename StateOf>
__device__ __forceinline__ auto combine_cluster_blocks(StateOf state_of, int cluster_blocks) {
  const int lane = threadIdx.x % kWarpSize;
  if constexpr (Idempotent<Fn>::value) {
    return warp_allreduce_with(state_of(lane % cluster_blocks), typename Fn::Combine());
  } else {
    return warp_allreduce_with(lane < cluster_blocks ? state_of(lane) : Fn::identity(),
                               typename Fn::Combine());
  }
}

// Combines the States of a cluster's blocks. Each block publishes its own in shared memory and
// every warp reads them all through distributed shared memory (combine_cluster_blocks), so no
// extra block barrier. It returns having arrived on the cluster barrier, and the caller must
// wait_for_cluster_readers() before it publishes again (next row) or exits, while others may still
// read its State; the row's stores go in between, so they overlap the wait.
template <typename Fn, typename State>
__device__ __forceinline__ State cluster_allreduce(State state, State* published,
                                                   int cluster_blocks) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  const cg::cluster_group cluster = cg::this_cluster();
  if (threadIdx.x == 0) *published = state;
  cluster.sync();
  state = combine_cluster_blocks<Fn>(
      [&](int block) { return *cluster.map_shared_rank(published, block); }, cluster_blocks);
  // Relaxed: this arrive only says the States were read, and they were (their values are in
  // hand). The default release arrive is a GPU-wide memory barrier first, which cost 1 point of
  // copy bandwidth across long rows on an H200.
  __cluster_barrier_arrive_relaxed();
#else
  // Host code launches clusters only for kernels built for sm_90 or newer (see plan_long_rows).
  (void)published;
  (void)cluster_blocks;
#endif
  return state;
}

__device__ __forceinline__ void wait_for_cluster_readers() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().barrier_wait();
#endif
}

// The same reduction for blocks that loop over rows, with no cluster barrier a row: each block
// pushes its State into a slot of every block of the cluster by st.async, which counts its bytes
// on that block's mbarrier, and each block waits on its own barrier only. cluster_allreduce's
// barrier is a release, a MEMBAR.ALL.GPU in every thread: a thread waits there for all its
// loads in flight, so a loop that loads its next row before it reduces the current one lost the
// overlap (Nsight Compute on an H200, the norm backward over clusters of 8: "membar" 2.4-3.2
// cycles of stall an issued instruction). A push needs no fence: the barrier's phase completes
// when the bytes have landed.
//
// Two sets of slots and barriers, by the parity of the round. A block pushes round r + 2 into a
// set only after its round r + 1 completed, which needed every block's round r + 1 push, which
// each block makes after it has read its round r slots (the block reduction between them has
// barriers): no push overwrites a slot being read, and none reaches a barrier in the wrong
// phase. Every block of a cluster must run the same rounds.
constexpr int kMailboxWords = 6;  // the largest State pushed: Moments<double>, 24 bytes

struct ClusterMailbox {
  uint32_t slot[2][kMaxClusterBlocks][kMailboxWords];
  uint64_t landed[2];  // mbarriers: one arrival (the block's own) and every block's bytes
};

// Before the first round, by every thread of the block: the barriers set up, and the whole
// cluster past that (no push may reach a barrier before its block initialized it).
__device__ __forceinline__ void open_mailbox(ClusterMailbox& box) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (threadIdx.x == 0) {
    for (int set = 0; set < 2; ++set) mbarrier_init(&box.landed[set], 1);
    mbarrier_init_fence();
  }
  cooperative_groups::this_cluster().sync();
#else
  (void)box;
#endif
}

// After the last round: every push to this block has landed (it waited for them), but a block
// leaves only once its cluster is done, as distributed shared memory requires.
__device__ __forceinline__ void close_mailbox() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  __cluster_barrier_arrive_relaxed();
  cooperative_groups::this_cluster().barrier_wait();
#endif
}

// cluster_allreduce by pushes: `state` is the block's (every thread holds the same), `round`
// counts the block's rounds from 0. The same bits in every block (combine_cluster_blocks).
template <typename Fn, typename State>
__device__ __forceinline__ State cluster_allreduce_pushed(State state, ClusterMailbox& box,
                                                          int cluster_blocks, uint32_t round) {
  constexpr int kWords = sizeof(State) / sizeof(uint32_t);
  static_assert(sizeof(State) % sizeof(uint32_t) == 0 && kWords <= kMailboxWords,
                "a pushed State is at most kMailboxWords 32-bit words");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const int set = round % 2;
  const uint32_t landed = shared_address(&box.landed[set]);
  if (threadIdx.x == 0)
    mbarrier_arrive_expect_tx(landed, static_cast<uint32_t>(cluster_blocks * sizeof(State)));
  if (static_cast<int>(threadIdx.x) < cluster_blocks) {
    // Thread t pushes to block t: into its slot there, counted on its barrier.
    const uint32_t to = threadIdx.x;
    uint32_t words[kWords];
    memcpy(words, &state, sizeof(State));
    const uint32_t rank = cooperative_groups::this_cluster().block_rank();
    const uint32_t slot = cluster_shared_address(shared_address(&box.slot[set][rank][0]), to);
    const uint32_t barrier = cluster_shared_address(landed, to);
#pragma unroll
    for (int w = 0; w < kWords; ++w) push_word(slot + w * sizeof(uint32_t), words[w], barrier);
  }
  mbarrier_wait(landed, (round / 2) % 2);
  state = combine_cluster_blocks<Fn>(
      [&](int block) {
        State pushed;
        memcpy(&pushed, box.slot[set][block], sizeof(State));
        return pushed;
      },
      cluster_blocks);
#else
  (void)box;
  (void)cluster_blocks;
  (void)round;
#endif
  return state;
}

// ---- Longer rows: a block, or a cluster of blocks, per row, in registers and shared memory. ----

constexpr int kRowBlockThreads = 256;
// Values a thread loads before using any, as whole packs: 32 (8 × 16 B of float, 4 of bfloat16).
// Measured on an H200, % of copy forward/backward: fp32 rows of 8192 went 86/87 -> 97/103 from
// 4 packs to 8, while bf16 rows lost (16384: 80 -> 68) from 4 packs to 8, i.e. from 32 values
// to 64, the register cost that matters. Copying the whole slice to shared memory at once with
// cp.async instead measured slower (fp32 16384: 85% against 93%; bf16 65536: 69% against 77%).
constexpr int kLoadBatchValues = 32;

template <int kPack>
constexpr int load_batch() {
  static_assert(kPack >= 1 && kPack <= kLoadBatchValues, "a pack holds 1 to 32 values");
  return std::min(8, kLoadBatchValues / kPack);  // unaligned rows (kPack == 1): 8 scalar loads
}

// Values of each input a thread of a caching block holds in registers, at the head of its slice;
// the rest of the slice goes to shared memory. An SM holds a slice in both, so a row needs fewer
// blocks a cluster (float forward, 262144: 8 instead of 16) and each block waits on fewer others
// before its stores. H200, % of copy, against the kernels it replaced (register clusters for float
// backward, shared memory alone otherwise): backward float 262144 88 (73), bfloat16 65536 83 (82),
// 262144 77 (72); float forward 65536 85 (82), 262144 77 (75). Half-precision ops of one input
// keep none: their values double in size as floats, their blocks then fit two an SM instead of
// three, and softmax's forward measured lower (bfloat16 65536: 72 against 77). The one-value path
// (kPack 1) is correct, not tuned, and keeps none either.
template <typename Fn, typename T, int kPack>
constexpr int kHeadColsPerThread =
    kPack > 1 && (Fn::kInputs > 1 || sizeof(T) >= 4) ? kRegisterRowColsPerThread / Fn::kInputs : 0;

template <typename Fn, typename T, int kPack>
constexpr int64_t kHeadCols = int64_t{kRowBlockThreads} * kHeadColsPerThread<Fn, T, kPack>;

// Blocks of a caching kernel an SM holds: the planner's shared-memory targets assume them, and
// __launch_bounds__ keeps the kernel's registers within them. Blocks with a register head take
// 100-128 registers a thread, so two fill the register file; without one, three blocks of 64 KB
// slices share an SM (see kSliceTargetBytes). Held to those registers, float forward rows of
// 65536 measured 1 point of copy more on an H200 than with ptxas's own register budget; the
// backward (two inputs) measured 1 point less so (bfloat16, 262144) and keeps ptxas's budget.
constexpr int kHeadBlocksPerSm = 2;
constexpr int kSliceBlocksPerSm = 3;

template <typename Fn, typename T, int kPack, bool kCacheRow>
constexpr int kRowBlocksPerSm =
    !kCacheRow || Fn::kInputs > 1 || std::is_same_v<T, double> ? kMinBlocksPerSm<T>
    : kHeadColsPerThread<Fn, T, kPack> > 0                     ? kHeadBlocksPerSm
                                                               : kSliceBlocksPerSm;

// Packs of a load batch reduced at once for ops of one input: 4, so that softmax's forward spends
// one max and one merge (two exps) on 4 packs instead of one. H200, rows of 32768 to 262144, % of
// copy: bfloat16 (all 4 packs of its batch) +2 to 3, float32 +1 against 2 packs and +2 against
// all 8, which hold too many floats at once. Its backward (two inputs), a sum of products, has no
// merge to save and goes pack by pack.
template <typename Fn, int kPack>
constexpr int kReducePacks = Fn::kInputs == 1 ? std::min(4, load_batch<kPack>()) : 1;

// Element j of a pack as M in the caching kernel. Ops of one input widen bfloat16 with
// opgen::widen (a shift or a mask a value): +1 point of copy for softmax's forward at rows of
// 65536 and 262144 on an H200. Its backward measured 1 point lower with it at 262144 and casts
// each value.
template <typename Fn, typename M, typename T, int kPack>
__device__ __forceinline__ M row_value(const Pack<T, kPack>& pack, int j) {
  if constexpr (Fn::kInputs == 1) {
    return widen<M>(pack, j);
  } else {
    return static_cast<M>(pack.elem[j]);
  }
}

// A cluster of `cluster_blocks` blocks per row (1: a plain block), block r owning columns
// [r * slice_cols, (r + 1) * slice_cols). kCacheRow keeps the slice on chip between the
// reduction and the output pass: its first kHeadCols values in registers, the rest in shared
// memory. Without it the second pass reads the inputs again (from L2 if they are still there),
// which is what a row too long for any cluster's shared memory gets.
template <typename Fn, typename T, int kPack, bool kCacheRow>
__global__ void __launch_bounds__(kRowBlockThreads, kRowBlocksPerSm<Fn, T, kPack, kCacheRow>)
    row_blocks_kernel(T* __restrict__ out, Inputs<Fn, T> in, int64_t rows, int64_t cols,
                      int64_t slice_cols, int cluster_blocks) {
  using M = at::opmath_type<T>;
  using State = typename Fn::State;
  using Pack = opgen::Pack<T, kPack>;
  constexpr int kInputs = Fn::kInputs;
  constexpr int kLoadBatch = load_batch<kPack>();
  constexpr int kHeadValues = kCacheRow ? kHeadColsPerThread<Fn, T, kPack> : 0;
  constexpr int64_t kHead = int64_t{kRowBlockThreads} * kHeadValues;
  const typename Fn::Combine combine;
  // kInputs tails of cached_cols values when kCacheRow; bytes, since the element type varies.
  extern __shared__ __align__(kVectorBytes) unsigned char cache_bytes[];
  __shared__ State scratch[kRowBlockThreads / kWarpSize];
  __shared__ State published;
  T* cache = reinterpret_cast<T*>(cache_bytes);

  const int rank = blockIdx.x % cluster_blocks;  // a 1-d cluster is consecutive blocks
  const int64_t slice_begin = rank * slice_cols;
  const int64_t slice_length = max(int64_t{0}, min(cols - slice_begin, slice_cols));
  const int64_t head_length = min(slice_length, kHead);
  const int64_t cached_cols = max(int64_t{0}, slice_cols - kHead);
  const int64_t tail_packs = (slice_length - head_length) / kPack;
  const int64_t clusters = gridDim.x / cluster_blocks;
  for (int64_t row = blockIdx.x / cluster_blocks; row < rows; row += clusters) {
    const int64_t head_offset = row * cols + slice_begin;
    const int64_t offset = head_offset + head_length;
    [[maybe_unused]] M head[kInputs][std::max(kHeadValues, 1)];
    if constexpr (kHeadValues > 0)
      load_span<Fn, T, kPack, kRowBlockThreads>(head, in, head_offset, head_length, threadIdx.x);
    State state = Fn::identity();
    for (int64_t first = threadIdx.x; first < tail_packs; first += kRowBlockThreads * kLoadBatch) {
      Pack raw[kLoadBatch][kInputs];
#pragma unroll
      for (int b = 0; b < kLoadBatch; ++b) {
        const int64_t p = first + b * kRowBlockThreads;
#pragma unroll
        for (int k = 0; k < kInputs; ++k) {
          if (p < tail_packs) raw[b][k] = load_pack<T, kPack>(in.ptr[k] + offset + p * kPack);
        }
      }
      // Cache each pack, and reduce kReducePacks at a time; a pack past the slice reads as padding.
      constexpr int kGroup = kReducePacks<Fn, kPack>;
#pragma unroll
      for (int g = 0; g < kLoadBatch; g += kGroup) {
        if (first + g * kRowBlockThreads >= tail_packs) continue;
        M v[kInputs][kGroup * kPack];
#pragma unroll
        for (int b = 0; b < kGroup; ++b) {
          const int64_t p = first + (g + b) * kRowBlockThreads;
#pragma unroll
          for (int k = 0; k < kInputs; ++k) {
            if (kCacheRow && p < tail_packs)
              store_pack<T, kPack>(cache + k * cached_cols + p * kPack, raw[g + b][k]);
#pragma unroll
            for (int j = 0; j < kPack; ++j) {
              v[k][b * kPack + j] =
                  p < tail_packs ? row_value<Fn, M>(raw[g + b][k], j) : Fn::kPadding;
            }
          }
        }
        state = combine(state, reduce_values<Fn>(v));
      }
    }
    // The head last, so its loads were in flight behind the tail's.
    if constexpr (kHeadValues > 0) state = combine(state, reduce_values<Fn>(head));
    state = block_allreduce_with<kRowBlockThreads>(state, combine, Fn::identity(), scratch);
    if (cluster_blocks > 1) state = cluster_allreduce<Fn>(state, &published, cluster_blocks);

    // Each thread reads back the packs it cached itself, so no barrier guards the cache.
    const auto output = Fn::output(state, cols);
    if constexpr (kHeadValues > 0) {
      store_span<T, kPack, kRowBlockThreads>(out, head_offset, head_length, threadIdx.x, true, head,
                                             output);
    }
    for (int64_t p = threadIdx.x; p < tail_packs; p += kRowBlockThreads) {
      M v[kInputs][kPack];
#pragma unroll
      for (int k = 0; k < kInputs; ++k) {
        const T* source = kCacheRow ? cache + k * cached_cols : in.ptr[k] + offset;
        const Pack raw = load_pack<T, kPack>(source + p * kPack);
#pragma unroll
        for (int j = 0; j < kPack; ++j) v[k][j] = row_value<Fn, M>(raw, j);
      }
      Pack result;
#pragma unroll
      for (int j = 0; j < kPack; ++j) result.elem[j] = static_cast<T>(at_element(output, v, j));
      store_pack<T, kPack>(out + offset + p * kPack, result);
    }
    if (cluster_blocks > 1) wait_for_cluster_readers();
  }
}

// ---- Any other dim: (outer, dim_size, inner) with inner > 1, reduced along the middle. ----

constexpr int kStridedBlockThreads = 512;
// Values of `dim` a thread loads before reducing them: 4 loads in flight, one merge per 4.
constexpr int kStridedBatch = 4;

// blockDim = (inner_lanes, dim_lanes): x runs along `inner`, so a warp's loads are contiguous
// (inner_lanes >= inner covers whole rows of the slab); y splits `dim`, and the dim_lanes partial
// States meet in a shared-memory tree.
template <typename Fn, typename T>
__global__ void __launch_bounds__(kStridedBlockThreads, kMinBlocksPerSm<T>)
    strided_kernel(T* __restrict__ out, Inputs<Fn, T> in, int64_t outer, int64_t dim_size,
                   int64_t inner) {
  using M = at::opmath_type<T>;
  using State = typename Fn::State;
  constexpr int kInputs = Fn::kInputs;
  const typename Fn::Combine combine;
  __shared__ State states[kStridedBlockThreads];
  const int inner_lanes = blockDim.x;
  const int dim_lanes = blockDim.y;
  const int tid = threadIdx.y * inner_lanes + threadIdx.x;
  const int64_t inner_tiles = (inner + inner_lanes - 1) / inner_lanes;
  for (int64_t tile = blockIdx.x; tile < outer * inner_tiles; tile += gridDim.x) {
    const int64_t i = tile % inner_tiles * inner_lanes + threadIdx.x;
    const bool active = i < inner;  // idle lanes stay for the barriers
    const int64_t base = tile / inner_tiles * dim_size * inner + i;
    State state = Fn::identity();
    for (int64_t first = threadIdx.y; first < dim_size;
         first += int64_t{dim_lanes} * kStridedBatch) {
      M v[kInputs][kStridedBatch];
#pragma unroll
      for (int b = 0; b < kStridedBatch; ++b) {
        const int64_t d = first + int64_t{b} * dim_lanes;
#pragma unroll
        for (int k = 0; k < kInputs; ++k) {
          v[k][b] =
              active && d < dim_size ? static_cast<M>(in.ptr[k][base + d * inner]) : Fn::kPadding;
        }
      }
      state = combine(state, reduce_values<Fn>(v));
    }
    states[tid] = state;
    __syncthreads();
    for (int stride = dim_lanes / 2; stride > 0; stride /= 2) {
      if (threadIdx.y < stride)
        states[tid] = combine(states[tid], states[tid + stride * inner_lanes]);
      __syncthreads();
    }
    const auto output = Fn::output(states[threadIdx.x], dim_size);
    __syncthreads();  // all have read states[] before the next tile writes it
    if (!active) continue;
    for (int64_t d = threadIdx.y; d < dim_size; d += dim_lanes) {
      M v[kInputs][1];
#pragma unroll
      for (int k = 0; k < kInputs; ++k) v[k][0] = static_cast<M>(in.ptr[k][base + d * inner]);
      out[base + d * inner] = static_cast<T>(at_element(output, v, 0));
    }
  }
}

// ---- Host side: choosing and launching a path. ----

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// The smallest power of two that is at least n, capped at the power of two `cap`.
inline int capped_power_of_two(int64_t n, int cap) {
  return ceil_power_of_two(static_cast<int>(std::min<int64_t>(n, cap)));
}

// Blocks for a grid-stride loop: as many as the GPU holds at once, so every SM streams at full
// occupancy, and never more than there is work for.
template <auto kKernel>
int64_t resident_blocks(int block_threads, int64_t blocks_needed) {
  const int64_t resident = static_cast<int64_t>(blocks_per_multiprocessor<kKernel>(block_threads)) *
                           multiprocessor_count();
  return std::clamp<int64_t>(blocks_needed, 1, resident);
}

template <typename Fn, typename T>
struct RowJob {
  T* out;
  Inputs<Fn, T> in;
  int64_t rows;
  int64_t cols;
  cudaStream_t stream;
};

// Capacities step by 2 on the 16-byte path. The one-value path (odd row lengths, offset views,
// double) steps by 4: it is correct, not tuned, and half as many kernels halve its build time.
template <int kPack>
constexpr int kCapacityStep = kPack == 1 ? 4 : 2;

// The register-row kernel for the smallest capacity that holds `cols`: capacities start at two
// packs a thread (4 values at the least) and grow by kCapacityStep. Narrow rows share a warp
// (kMinColsPerThread values a thread); wider ones give each thread more values, up to
// kRegisterRowColsPerThread, and then more threads. The recursion instantiates one kernel per
// capacity.
template <typename Fn, typename T, int kPack, int kCapacity = std::max(2 * kPack, 4)>
void launch_warp_rows(const RowJob<Fn, T>& job) {
  // Two packs a thread at the least, so each has two 16-byte loads in flight.
  constexpr int kMinColsPerThread = 2 * kPack;
  static_assert(kRegisterRowColsPerThread % kMinColsPerThread == 0, "whole packs a thread");
  static_assert(kRegisterRowMaxCols<T> % kCapacity == 0, "capacities grow to the maximum");
  if constexpr (kCapacity < kRegisterRowMaxCols<T>) {
    if (job.cols > kCapacity) {
      launch_warp_rows<Fn, T, kPack, kCapacityStep<kPack> * kCapacity>(job);
      return;
    }
  }
  constexpr int kColsPerThread =
      std::clamp(kCapacity / kWarpSize, kMinColsPerThread, kRegisterRowColsPerThread);
  constexpr int kThreadsPerRow = kCapacity / kColsPerThread;
  constexpr int kBlockThreads = warp_rows_block_threads(kThreadsPerRow);
  constexpr int kRowsPerBlock = kBlockThreads / kThreadsPerRow;
  // A block for every kRowsPerBlock rows, up to CUDA's grid limit (the kernel loops past it).
  // Blocks that loop over rows instead, as many as stay resident, measured 5-7 points of copy
  // lower on an H200 (float32 rows of 128: 94% against 99%; bfloat16 rows of 4096: 89 against
  // 97): a looping block waits for its loads each row, while a new block's loads start as soon
  // as a slot frees.
  const int64_t blocks =
      std::clamp<int64_t>(ceil_div(job.rows, kRowsPerBlock), 1, std::numeric_limits<int>::max());
  warp_rows_kernel<Fn, T, kPack, kColsPerThread, kThreadsPerRow>
      <<<static_cast<unsigned>(blocks), kBlockThreads, 0, job.stream>>>(job.out, job.in, job.rows,
                                                                        job.cols);
  OPGEN_CHECK_LAUNCH();
}

// How a row longer than one block's registers is cut: `cluster_blocks` blocks (1: a plain block,
// on any GPU), block r taking columns [r * slice_cols, (r + 1) * slice_cols) with smem_bytes of
// dynamic shared memory.
struct SlicePlan {
  int cluster_blocks;
  int64_t slice_cols;
  size_t smem_bytes;
};

// The kernels for rows past kRegisterRowMaxCols: a cluster (or a block) holding its slices on
// chip, or a block reading the row twice.
enum class LongRowPath { kOnChipSlices, kTwoReads };

struct LongRowPlan {
  LongRowPath path;
  SlicePlan slices;
};

// Shared memory a slice of a block without a register head aims for: 64 KB leaves room for three
// blocks in an SM's 227 KB, so one block's loads overlap another's reductions and stores. On an
// H200 it beat 16, 32 and 128 KB (forward, % of copy: 72-87 against 44-76, 61-80 and 44-85).
constexpr size_t kSliceTargetBytes = 64 * 1024;

// The launch of a long-row kernel with `block_threads` threads a block, per `plan`;
// `cluster_dims` backs config.attrs.
inline cudaLaunchConfig_t slices_config(const SlicePlan& plan, int block_threads, int64_t blocks,
                                        cudaStream_t stream, cudaLaunchAttribute& cluster_dims) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(block_threads);
  config.dynamicSmemBytes = plan.smem_bytes;
  config.stream = stream;
  cluster_dims.id = cudaLaunchAttributeClusterDimension;
  cluster_dims.val.clusterDim.x = static_cast<unsigned>(plan.cluster_blocks);
  cluster_dims.val.clusterDim.y = 1;
  cluster_dims.val.clusterDim.z = 1;
  config.attrs = &cluster_dims;
  config.numAttrs = plan.cluster_blocks > 1 ? 1 : 0;  // pre-sm_90 GPUs reject the attribute
  return config;
}

template <typename Kernel, typename... Args>
void launch_slices(Kernel kernel, const SlicePlan& plan, int block_threads, int64_t blocks,
                   cudaStream_t stream, Args... args) {
  cudaLaunchAttribute cluster_dims;
  const cudaLaunchConfig_t config =
      slices_config(plan, block_threads, blocks, stream, cluster_dims);
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args..., plan.cluster_blocks));
  OPGEN_CHECK_LAUNCH();
}

// Whether the GPU can hold one cluster of this plan at all (a 16-block cluster needs one GPC
// with room for 16 blocks).
template <typename Kernel>
bool schedulable(Kernel kernel, const SlicePlan& plan, int block_threads) {
  if (plan.cluster_blocks == 1) return true;
  cudaLaunchAttribute cluster_dims;
  const cudaLaunchConfig_t config =
      slices_config(plan, block_threads, plan.cluster_blocks, nullptr, cluster_dims);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
    (void)cudaGetLastError();  // a "no" here, not an error for the next launch check to report
    return false;
  }
  return clusters > 0;
}

// What planning needs of a long-row kernel on the current device: the dynamic shared memory a
// block may take, what a slice aims for, and the largest cluster its code allows. The kernel is
// opted in to the first and last, once: the shared memory attribute is a ceiling, and each launch
// still asks only for its plan's bytes. ptxVersion is the virtual arch the loaded kernel came
// from: a compute_80 build, even JIT-ed for an H200, has no cluster code.
struct SliceLimits {
  size_t max_slice_bytes;
  size_t target_slice_bytes;
  int max_blocks;
};

template <typename Kernel>
SliceLimits opt_in_slices(Kernel kernel, bool register_head) {
  cudaFuncAttributes attributes;
  C10_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  const int device = c10::cuda::current_device();
  int smem_per_block = 0;
  int smem_per_sm = 0;
  int reserved_per_block = 0;
  C10_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  C10_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  C10_CUDA_CHECK(
      cudaDeviceGetAttribute(&reserved_per_block, cudaDevAttrReservedSharedMemoryPerBlock, device));
  const size_t max_slice_bytes = smem_per_block - attributes.sharedSizeBytes;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(max_slice_bytes)));
  const size_t target_slice_bytes =
      register_head
          ? smem_per_sm / kHeadBlocksPerSm - reserved_per_block - attributes.sharedSizeBytes
          : kSliceTargetBytes;
  const int max_blocks = attributes.ptxVersion >= 90 ? kMaxClusterBlocks : 1;
  if (max_blocks > 8) {  // 8 is the portable cluster size
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  }
  return {max_slice_bytes, std::min(target_slice_bytes, max_slice_bytes), max_blocks};
}

// Slices cached on chip: the fewest cluster blocks (1, 2, 4, 8 or 16) whose shared-memory part
// stays within the target, or failing that the most blocks with it up to all of shared memory (one
// block an SM, still one DRAM read). None when even that does not hold the row. Powers of two
// because the others measured no better and sometimes far worse (H200, float backward at 262144,
// % of copy: 72 with the 15 blocks that would fit, 88 with 16).
template <typename Fn, typename T, int kPack, typename Kernel>
std::optional<SlicePlan> choose_slices(Kernel kernel, const SliceLimits& limits, int64_t cols) {
  const auto plan_for = [&](int blocks) {
    const int64_t slice_cols = ceil_div(ceil_div(cols, blocks), kPack) * kPack;
    const int64_t cached_cols = std::max<int64_t>(0, slice_cols - kHeadCols<Fn, T, kPack>);
    return SlicePlan{blocks, slice_cols,
                     static_cast<size_t>(cached_cols) * Fn::kInputs * sizeof(T)};
  };
  for (int blocks = 1; blocks <= limits.max_blocks; blocks *= 2) {
    const SlicePlan plan = plan_for(blocks);
    if (plan.smem_bytes <= limits.target_slice_bytes && schedulable(kernel, plan, kRowBlockThreads))
      return plan;
  }
  for (int blocks = limits.max_blocks; blocks >= 1; blocks /= 2) {
    const SlicePlan plan = plan_for(blocks);
    if (plan.smem_bytes <= limits.max_slice_bytes && schedulable(kernel, plan, kRowBlockThreads))
      return plan;
  }
  return std::nullopt;
}

template <typename Fn, typename T, int kPack>
constexpr auto kOnChipKernel = row_blocks_kernel<Fn, T, kPack, true>;

template <typename Fn, typename T, int kPack>
SliceLimits opt_in_long_rows() {
  return opt_in_slices(kOnChipKernel<Fn, T, kPack>, kHeadColsPerThread<Fn, T, kPack> > 0);
}

template <typename Fn, typename T, int kPack>
LongRowPlan choose_long_rows(const SliceLimits& limits, int64_t cols) {
  const auto slices = choose_slices<Fn, T, kPack>(kOnChipKernel<Fn, T, kPack>, limits, cols);
  if (slices) return {LongRowPath::kOnChipSlices, *slices};
  return {LongRowPath::kTwoReads, SlicePlan{1, cols, 0}};
}

// choose_long_rows for the current device, remembered: its driver queries take microseconds
// each, as long as a short row's kernel, and a model's rows keep their lengths call after call.
// Each device opts the kernels in once and plans each row length once (up to kMaxPlans of them;
// past that it starts over).
template <typename Fn, typename T, int kPack>
LongRowPlan plan_long_rows(int64_t cols) {
  constexpr size_t kMaxPlans = 64;
  struct Memo {
    std::optional<SliceLimits> limits;
    std::unordered_map<int64_t, LongRowPlan> plans;
  };
  static std::mutex mutex;  // threads may launch at once
  static Memo memos[kMaxDevices];
  const int device = c10::cuda::current_device();
  Memo unremembered;
  Memo& memo = device < kMaxDevices ? memos[device] : unremembered;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto known = memo.plans.find(cols); known != memo.plans.end()) return known->second;
  if (!memo.limits) memo.limits = opt_in_long_rows<Fn, T, kPack>();
  if (memo.plans.size() >= kMaxPlans) memo.plans.clear();
  return memo.plans[cols] = choose_long_rows<Fn, T, kPack>(*memo.limits, cols);
}

template <typename Fn, typename T, int kPack>
void launch_rows(const RowJob<Fn, T>& job) {
  // The path by row length, i.e. by what part of the GPU must hold one row:
  if (job.cols <= kRegisterRowMaxCols<T>) {
    // 16384 = 512 threads × 32 values: the row sits in registers (32 floats a thread, 64 for two
    // inputs, stay clear of spilling) of one warp up to 1024, else of 2 to 16 warps that meet in
    // shared memory. A block holds several rows when they are short: a block per row of 8 KB
    // (bf16 4096) spent as long on its launch and barriers as on its DRAM traffic, and reached
    // 56% of copy.
    launch_warp_rows<Fn, T, kPack>(job);
    return;
  }
  const LongRowPlan plan = plan_long_rows<Fn, T, kPack>(job.cols);
  const SlicePlan& slices = plan.slices;
  // A cluster per row, up to CUDA's grid limit (the kernels loop past it).
  const int64_t clusters =
      std::min<int64_t>(job.rows, std::numeric_limits<int>::max() / slices.cluster_blocks);
  const int64_t cluster_grid = clusters * slices.cluster_blocks;
  switch (plan.path) {
    case LongRowPath::kOnChipSlices:
      // Up to one block's registers and shared memory, or 16 of them in a cluster on sm_90: the
      // row is held on chip and read from DRAM once.
      launch_slices(kOnChipKernel<Fn, T, kPack>, slices, kRowBlockThreads, cluster_grid, job.stream,
                    job.out, job.in, job.rows, job.cols, slices.slice_cols);
      return;
    case LongRowPath::kTwoReads: {
      // Longer still, nothing on chip holds it: a block per row reads it twice, the second time
      // from L2 when it is still there.
      constexpr auto kernel = row_blocks_kernel<Fn, T, kPack, false>;
      launch_slices(kernel, slices, kRowBlockThreads,
                    resident_blocks<kernel>(kRowBlockThreads, job.rows), job.stream, job.out,
                    job.in, job.rows, job.cols, job.cols);
      return;
    }
  }
}

template <typename Fn, typename T>
void launch_strided(T* out, const Inputs<Fn, T>& in, const Slabs& slabs, cudaStream_t stream) {
  // A warp's lanes span min(inner, 32) columns, so its loads cover whole runs of `inner`; the
  // rest of the block splits `dim`.
  const int inner_lanes = capped_power_of_two(slabs.inner, kWarpSize);
  const int dim_lanes = capped_power_of_two(slabs.dim_size, kStridedBlockThreads / inner_lanes);
  constexpr auto kernel = strided_kernel<Fn, T>;
  const int64_t tiles = slabs.outer * ceil_div(slabs.inner, inner_lanes);
  const int64_t blocks = resident_blocks<kernel>(inner_lanes * dim_lanes, tiles);
  kernel<<<static_cast<unsigned>(blocks), dim3(inner_lanes, dim_lanes), 0, stream>>>(
      out, in, slabs.outer, slabs.dim_size, slabs.inner);
  OPGEN_CHECK_LAUNCH();
}

template <typename Fn, typename T, typename... Pointers>
Inputs<Fn, T> inputs_of(const Pointers*... inputs) {
  static_assert(sizeof...(Pointers) == Fn::kInputs, "one pointer per input of the op");
  static_assert((std::is_same_v<Pointers, T> && ...), "the inputs are of the output's type");
  return {inputs...};
}

}  // namespace row_engine

// out[r][c] = Fn's output for element c of row r, for `rows` rows of `row_length` values: the
// output and each of Fn::kInputs inputs dense, of T, on the current device. Runs on `stream`,
// checks the launch. The host side costs a few map lookups a call (plans are remembered per row
// length); it neither allocates device memory nor synchronizes, so it is safe in CUDA graphs.
template <typename Fn, typename T, typename... Pointers>
void launch_row_op(T* out, int64_t rows, int64_t row_length, cudaStream_t stream,
                   const Pointers*... inputs) {
  if (rows == 0 || row_length == 0) return;
  const row_engine::RowJob<Fn, T> job{out, row_engine::inputs_of<Fn, T>(inputs...), rows,
                                      row_length, stream};
  // double takes the one-value path only: it is correct, not tuned, and a second set of double
  // kernels would cost build time for little gain.
  constexpr int kPack = std::is_same_v<T, double> ? 1 : pack_size<T>();
  // Every row starts on a 16-byte boundary when the row length is a whole number of packs and
  // the tensors do; a view with a storage offset, or an odd length, takes the one-value path.
  const bool vectorized = kPack > 1 && row_length % kPack == 0 && is_aligned(out, kVectorBytes) &&
                          (is_aligned(inputs, kVectorBytes) && ...);
  if constexpr (kPack > 1) {
    if (vectorized) return row_engine::launch_rows<Fn, T, kPack>(job);
  }
  row_engine::launch_rows<Fn, T, 1>(job);
}

// The same along the middle dimension of `slabs` (any dim of a tensor; inner == 1 is rows).
template <typename Fn, typename T, typename... Pointers>
void launch_slab_op(T* out, const Slabs& slabs, cudaStream_t stream, const Pointers*... inputs) {
  if (slabs.inner > 1) {
    if (slabs.outer == 0 || slabs.dim_size == 0) return;
    row_engine::launch_strided<Fn, T>(out, row_engine::inputs_of<Fn, T>(inputs...), slabs, stream);
    return;
  }
  launch_row_op<Fn, T>(out, slabs.outer, slabs.dim_size, stream, inputs...);
}

}  // namespace opgen
