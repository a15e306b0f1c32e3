// mbarriers (sm_90): 64-bit barriers in shared memory that a block's threads, the copy engine
// (TMA) and other blocks of its cluster (st.async) arrive on. A barrier's phase completes when its
// expected arrivals have arrived and, with expect_tx, its expected bytes have landed; waiting
// names the parity of the phase waited for (phase 0, 1, 0, ...: round r of a ring of stages waits
// for parity r % 2; a fresh barrier counts the phase before phase 0, of parity 1, as complete).
// The tensor-core kernels (tensor_core.cuh's TMA pipelines) and the row engine's cluster mailbox
// (row_engine.cuh) use them. Compiled for an older architecture, these do nothing: a host side
// launches their kernels on sm_90 and newer only.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define OPGEN_MBARRIER 1
#else
#define OPGEN_MBARRIER 0
#endif

namespace opgen {

// The 32-bit shared-window address that ldmatrix, cp.async and mbarriers take.
__device__ __forceinline__ uint32_t shared_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

__device__ __forceinline__ void mbarrier_init(uint64_t* barrier, int arrivals) {
#if OPGEN_MBARRIER
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(barrier)),
               "r"(arrivals));
#endif
}

// Makes initialized barriers visible to the copy engine and the cluster (and the rest of the
// block, with the __syncthreads() or cluster barrier that must follow).
__device__ __forceinline__ void mbarrier_init_fence() {
#if OPGEN_MBARRIER
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* barrier) {
#if OPGEN_MBARRIER
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(barrier))
               : "memory");
#endif
}

// One arrival that also expects `bytes` more to land (by TMA or st.async) before the phase
// completes. Bytes may land before it: the phase cannot complete while this arrival is missing.
// (The barrier by its shared address, or by pointer.)
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t barrier, uint32_t bytes) {
#if OPGEN_MBARRIER
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes)
               : "memory");
#endif
}

__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* barrier, uint32_t bytes) {
  mbarrier_arrive_expect_tx(shared_address(barrier), bytes);
}

__device__ __forceinline__ void mbarrier_wait(uint32_t barrier, uint32_t parity) {
#if OPGEN_MBARRIER
  asm volatile(
      "{\n.reg .pred done;\nwait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(barrier),
      "r"(parity)
      : "memory");
#endif
}

__device__ __forceinline__ void mbarrier_wait(uint64_t* barrier, uint32_t parity) {
  mbarrier_wait(shared_address(barrier), parity);
}

// The address in the cluster's shared window of `address` (in this block's shared memory) in
// block `rank` of the cluster.
__device__ __forceinline__ uint32_t cluster_shared_address(uint32_t address, uint32_t rank) {
  uint32_t mapped = 0;
#if OPGEN_MBARRIER
  asm("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(mapped) : "r"(address), "r"(rank));
#endif
  return mapped;
}

// Stores `word` at `to` in another block's shared memory (cluster_shared_address) and counts its
// 4 bytes on that block's barrier `landed` (also mapped): no fence, the phase's completion
// publishes it.
__device__ __forceinline__ void push_word(uint32_t to, uint32_t word, uint32_t landed) {
#if OPGEN_MBARRIER
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(to),
      "r"(word), "r"(landed)
      : "memory");
#endif
}

}  // namespace opgen
