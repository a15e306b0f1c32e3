// Launch sizing and checks shared by the CUDA kernels.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace opgen {

// Devices whose per-device answers the launchers remember (a device past it asks every time).
constexpr int kMaxDevices = 64;

// An attribute of the current device (cudaDevAttr...), read once per device (the query is
// cheap, but not free on every launch).
template <cudaDeviceAttr kAttribute>
inline int device_attribute() {
  static std::atomic<int> values[kMaxDevices] = {};  // threads may launch on one device at once
  const int device = c10::cuda::current_device();
  int value = device < kMaxDevices ? values[device].load(std::memory_order_relaxed) : 0;
  if (value == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&value, kAttribute, device));
    if (device < kMaxDevices) values[device].store(value, std::memory_order_relaxed);
  }
  return value;
}

inline int multiprocessor_count() {
  return device_attribute<cudaDevAttrMultiProcessorCount>();
}

// What `ask(device)` tells of `kernel` on the current device (its occupancy, whether it was
// built for this architecture, ...), asked once per kernel and device and then remembered:
// such driver queries cost microseconds a launch. Each asking site (its lambda's type) keeps
// answers of its own.
template <typename Kernel, typename Ask>
auto once_per_kernel_and_device(Kernel kernel, Ask ask) {
  using Answer = decltype(ask(0));
  static std::mutex mutex;
  static std::map<std::pair<int, const void*>, Answer> known;
  const int device = c10::cuda::current_device();
  const std::pair<int, const void*> key{device, reinterpret_cast<const void*>(kernel)};
  const std::lock_guard<std::mutex> lock(mutex);
  const auto found = known.find(key);
  if (found != known.end()) return found->second;
  const Answer answer = ask(device);
  known.emplace(key, answer);
  return answer;
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
