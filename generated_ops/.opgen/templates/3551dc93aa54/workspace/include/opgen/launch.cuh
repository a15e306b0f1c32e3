// Launch sizing and checks shared by the CUDA kernels.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

namespace opgen {

// Multiprocessors of the current device, read once per device (the attribute query is cheap,
// but not free on every launch).
inline int multiprocessor_count() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> counts[kMaxDevices] = {};  // threads may launch on one device at once
  const int device = c10::cuda::current_device();
  int count = device < kMaxDevices ? counts[device].load(std::memory_order_relaxed) : 0;
  if (count == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    if (device < kMaxDevices) counts[device].store(count, std::memory_order_relaxed);
  }
  return count;
}

}  // namespace opgen

// Surfaces a bad launch (too much shared memory, bad grid) at the call site rather than at the
// next unrelated CUDA call.
#define OPGEN_CHECK_LAUNCH() C10_CUDA_KERNEL_LAUNCH_CHECK()
