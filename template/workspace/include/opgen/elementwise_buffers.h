// What an elementwise op's CUDA binding hands its kernels (opgen/elementwise.cuh, through the op's
// <op>_cuda.h): dense buffers of one dtype and length as data pointers. So the kernel file needs
// no torch tensor or dispatcher headers, which nvcc parses twice (for the device and for the
// host): gelu_cuda.cu compiles in 12-16 s where it took 53 s with them.
#pragma once

#include <c10/core/ScalarType.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace opgen {

// kInputs buffers read and kOutputs written, each of `numel` elements of `dtype`, on the current
// device, for kernels on `stream`.
template <int kInputs, int kOutputs>
struct ElementwiseBuffers {
  static_assert(kInputs >= 1 && kOutputs >= 1, "an elementwise kernel reads and writes a buffer");
  c10::ScalarType dtype;
  int64_t numel;
  const void* inputs[kInputs];
  void* outputs[kOutputs];
  cudaStream_t stream;
};

}  // namespace opgen
