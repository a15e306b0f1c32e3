// A bitonic sorting network over items held in registers: the block's tile of
// kThreads * kItems items, thread t holding items t * kItems + j (j = 0 .. kItems - 1) in
// ascending j. Compare-exchanges between items of one thread run in registers, between lanes
// of a warp through shuffles, and between warps through shared memory (the only barriers).
//
// The network is the one whose every compare-exchange puts the smaller item first: merge stage
// s (s = 1, 2, ...) pairs each item with its mirror image inside its aligned group of 2^s items
// (index i with i ^ (2^s - 1)), then with i ^ 2^b for b = s - 2 down to 0. After stage s every
// aligned group of 2^s items is sorted ascending, so stopping at log2(row) sorts many short rows
// of a tile at once and a descending sort is an ascending one of complemented keys.
//
// Items are compared whole, as 32-bit unsigned integers or doubles (the two the op's register
// path packs; 64-bit integer items failed a check at rows of 2 and are not supported): callers pack
// a key and a tie-break into one (key << bits | position sorts by key, then by position, which
// makes the network's result stable) and pad with an item above every other (all bits set, +inf).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "opgen/reduce.cuh"

namespace opgen::bitonic {

template <typename Item>
constexpr bool kSupportedItem = std::is_same_v<Item, uint32_t> || std::is_same_v<Item, double>;

__host__ __device__ constexpr int log2_of(int n) {
  return n <= 1 ? 0 : 1 + log2_of(n / 2);
}

// (a, b) <- (min, max).
template <typename Item>
__device__ __forceinline__ void order(Item& a, Item& b) {
  if constexpr (std::is_same_v<Item, uint32_t>) {
    const uint32_t low = min(a, b);  // IMNMX: one instruction each
    b = max(a, b);
    a = low;
  } else {
    const bool swap = b < a;
    const Item low = swap ? b : a;
    b = swap ? a : b;
    a = low;
  }
}

// The smaller of `mine` and `theirs` where `keep_smaller`, else the larger.
template <typename Item>
__device__ __forceinline__ Item keep(Item mine, Item theirs, bool keep_smaller) {
  return (theirs < mine) == keep_smaller ? theirs : mine;
}

// Where each thread's items live in the shared-memory tile: thread t's item j at
// t * kItems + (j ^ swizzle(t)), so that when every lane of a warp stores or loads its item j
// (or its partner's), the lanes fall in distinct banks.
template <int kItems>
__device__ __forceinline__ int shared_slot(int thread, int j) {
  constexpr int kSwizzle = (kItems < kWarpSize ? kItems : kWarpSize) - 1;
  return thread * kItems + (j ^ (thread & kSwizzle));
}

// In-thread steps; `top` and `bit` are compile-time constants wherever these are unrolled, so the
// items stay in registers. The mirror step of the stage whose highest bit is `top`
// (top < log2(kItems)): item j against item j ^ (2^(top + 1) - 1).
template <int kItems, typename Item>
__device__ __forceinline__ void mirror_in_thread(Item (&items)[kItems], int top) {
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int partner = j ^ ((2 << top) - 1);
    if (j < partner) order(items[j], items[partner]);
  }
}

// A halving step within the thread: j against j ^ 2^bit.
template <int kItems, typename Item>
__device__ __forceinline__ void halve_in_thread(Item (&items)[kItems], int bit) {
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    if ((j & (1 << bit)) == 0) order(items[j], items[j | (1 << bit)]);
  }
}

// The first kStages stages, all within the thread (kStages <= log2(kItems)): each aligned group
// of 2^kStages of its items sorted, in one straight run of compare-exchanges.
template <int kStages, int kItems, typename Item>
__device__ __forceinline__ void sort_in_thread(Item (&items)[kItems]) {
#pragma unroll
  for (int stage = 1; stage <= kStages; ++stage) {
    mirror_in_thread(items, stage - 1);
#pragma unroll
    for (int bit = stage - 2; bit >= 0; --bit) halve_in_thread(items, bit);
  }
}

// sort_in_thread<stages> for a run-time `stages` below kStages + 1: one straight run per count.
// (A run-time loop choosing among unrolled steps lets the compiler merge them into one step with a
// run-time register index, which moves the items to local memory.)
template <int kStages, int kItems, typename Item>
__device__ __forceinline__ void sort_in_thread_up_to(Item (&items)[kItems], int stages) {
  if constexpr (kStages > 0) {
    if (stages == kStages) {
      sort_in_thread<kStages>(items);
    } else {
      sort_in_thread_up_to<kStages - 1>(items, stages);
    }
  }
}

// Sorts ascending every aligned group of 2^log2_group items of the block's tile
// (log2_group <= log2(kThreads * kItems), the same in every thread). When groups span more than
// a warp, every thread of the block must call it, and `shared` must hold kThreads * kItems items;
// otherwise warps run independently and `shared` is not touched.
template <int kThreads, int kItems, typename Item>
__device__ __forceinline__ void sort_tile(Item (&items)[kItems], int log2_group, Item* shared) {
  static_assert(kSupportedItem<Item>, "items are uint32_t or double (see the top of this file)");
  static_assert(kItems >= 2 && (kItems & (kItems - 1)) == 0, "kItems: a power of two, 2 or more");
  static_assert(
      kThreads % kWarpSize == 0 && ((kThreads / kWarpSize) & (kThreads / kWarpSize - 1)) == 0,
      "kThreads: a power-of-two number of whole warps");
  constexpr int kThreadBits = log2_of(kItems);  // index bits below it: within a thread
  constexpr int kWarpBits = kThreadBits + log2_of(kWarpSize);  // below it: within a warp
  const int thread = static_cast<int>(threadIdx.x);
  const int lane = thread % kWarpSize;

  // Groups no longer than a thread's items are sorted within it. Otherwise the first log2(kItems)
  // stages sort each thread's items, in one straight run (a run-time loop around the steps would
  // cost register moves at every turn).
  if (log2_group < kThreadBits) {
    sort_in_thread_up_to<kThreadBits - 1>(items, log2_group);
    return;
  }
  sort_in_thread<kThreadBits>(items);

  // Through shared memory: item i meets item i ^ partner_mask, which lies in another warp.
  auto across_warps = [&](int partner_mask, int top_bit) {
    const int partner_thread = thread ^ (partner_mask >> kThreadBits);
    const int partner_j_mask = partner_mask & (kItems - 1);
    const bool keep_smaller = ((thread >> (top_bit - kThreadBits)) & 1) == 0;
#pragma unroll
    for (int j = 0; j < kItems; ++j) shared[shared_slot<kItems>(thread, j)] = items[j];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      items[j] = keep(items[j], shared[shared_slot<kItems>(partner_thread, j ^ partner_j_mask)],
                      keep_smaller);
    }
    __syncthreads();  // before the next step's stores
  };

  // The stages across threads: the mirror step, the halving steps across warps and lanes, then
  // every in-thread step, again in one straight run.
  for (int stage = kThreadBits + 1; stage <= log2_group; ++stage) {
    const int top = stage - 1;  // the highest index bit this stage's steps flip
    if (top < kWarpBits) {
      // The partner lane holds the mirrored items: its item kItems - 1 - j pairs with our j.
      const int lane_mask = (2 << (top - kThreadBits)) - 1;
      const bool keep_smaller = ((lane >> (top - kThreadBits)) & 1) == 0;
#pragma unroll
      for (int j = 0; j < kItems / 2; ++j) {
        const Item for_low = shfl_xor_any(items[kItems - 1 - j], lane_mask);
        const Item for_high = shfl_xor_any(items[j], lane_mask);
        items[j] = keep(items[j], for_low, keep_smaller);
        items[kItems - 1 - j] = keep(items[kItems - 1 - j], for_high, keep_smaller);
      }
    } else {
      across_warps((2 << top) - 1, top);
    }
    for (int bit = top - 1; bit >= kWarpBits; --bit) across_warps(1 << bit, bit);
    for (int bit = min(top - 1, kWarpBits - 1); bit >= kThreadBits; --bit) {
      const int lane_mask = 1 << (bit - kThreadBits);
      const bool keep_smaller = (lane & lane_mask) == 0;
#pragma unroll
      for (int j = 0; j < kItems; ++j)
        items[j] = keep(items[j], shfl_xor_any(items[j], lane_mask), keep_smaller);
    }
#pragma unroll
    for (int bit = kThreadBits - 1; bit >= 0; --bit) halve_in_thread(items, bit);
  }
}

}  // namespace opgen::bitonic
