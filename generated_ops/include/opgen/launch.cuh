// Launch sizing and checks shared by the CUDA kernels.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace opgen {

// Multiprocessors of the current device, read once per device (the attribute query is cheap,
// but not free on every launch).
inline int multiprocessor_count() {
  constexpr int kMaxDevices = 64;
  static int counts[kMaxDevices] = {};
  const int device = c10::cuda::current_device();
  if (device >= kMaxDevices) {
    int count = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
    return count;
  }
  if (counts[device] == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&counts[device], cudaDevAttrMultiProcessorCount, device));
  }
  return counts[device];
}

// Grid for a grid-stride loop over `work_items`: enough blocks to fill every multiprocessor
// `waves` times over, never more than there is work for.
inline int64_t grid_size(int64_t work_items, int threads_per_block, int waves = 8) {
  const int64_t needed = (work_items + threads_per_block - 1) / threads_per_block;
  const int64_t filling = static_cast<int64_t>(multiprocessor_count()) * waves;
  return std::max<int64_t>(1, std::min(needed, filling));
}

}  // namespace opgen

// Surfaces a bad launch (too much shared memory, bad grid) at the call site rather than at the
// next unrelated CUDA call.
#define OPGEN_CHECK_LAUNCH() C10_CUDA_KERNEL_LAUNCH_CHECK()
