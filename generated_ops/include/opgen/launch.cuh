// Launch sizing and checks shared by the CUDA kernels.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace opgen {

// Devices whose per-device answers the launchers remember (a device past it asks every time).
constexpr int kMaxDevices = 64;

// Multiprocessors of the current device, read once per device (the attribute query is cheap,
// but not free on every launch).
inline int multiprocessor_count() {
  static std::atomic<int> counts[kMaxDevices] = {};  // threads may launch on one device at once
  const int device = c10::cuda::current_device();
  int count = device < kMaxDevices ? counts[device].load(std::memory_order_relaxed) : 0;
  if (count == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    if (device < kMaxDevices) counts[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

// Blocks of kKernel, launched with `block_threads` threads (a power of two) and `smem_bytes` of
// dynamic shared memory, that one multiprocessor of the current device holds at once. Asked of
// the driver once per kernel, device and block size (so a kernel's launches of one block size
// must ask the same dynamic shared memory): the query costs microseconds a launch.
template <auto kKernel>
int blocks_per_multiprocessor(int block_threads, size_t smem_bytes = 0) {
  constexpr int kBlockSizes = 11;  // 1 to 1024 threads
  static std::atomic<int> cache[kMaxDevices][kBlockSizes] = {};
  int size_index = 0;
  while ((1 << size_index) < block_threads) ++size_index;
  const int device = c10::cuda::current_device();
  const bool remembered =
      device < kMaxDevices && size_index < kBlockSizes && (1 << size_index) == block_threads;
  int blocks = remembered ? cache[device][size_index].load(std::memory_order_relaxed) : 0;
  if (blocks == 0) {
    C10_CUDA_CHECK(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kKernel, block_threads, smem_bytes));
    blocks = std::max(blocks, 1);
    if (remembered) cache[device][size_index].store(blocks, std::memory_order_relaxed);
  }
  return blocks;
}

}  // namespace opgen

// Surfaces a bad launch (too much shared memory, bad grid) at the call site rather than at the
// next unrelated CUDA call.
#define OPGEN_CHECK_LAUNCH() C10_CUDA_KERNEL_LAUNCH_CHECK()
