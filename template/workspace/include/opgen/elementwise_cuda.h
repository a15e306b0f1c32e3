// The CUDA side of the elementwise host code (opgen/elementwise_op.h), for an op's CUDA binding
// (<op>_cuda_binding.cpp): the checks, device guard, broadcasting and allocation as on the CPU,
// then the tensors handed to the op's kernels (<op>_cuda.cu, through opgen/elementwise.cuh) as
// dense buffers on the current stream. Host code: the C++ compiler builds it, so nvcc never parses
// the torch tensor and dispatcher headers for an elementwise op (it reads this header only for
// the earlier form of the op's CUDA file: OnCuda::launch).
//
//   m.impl("relu", [](const at::Tensor& x) {
//     return opgen::cuda_elementwise_forward("relu", {"x"}, {x}, [](const auto& buffers) {
//       relu_cuda_forward(buffers);  // relu_cuda.cu
//     });
//   });
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <array>
#include <cstddef>

#include "opgen/broadcast.h"
#include "opgen/checks.h"
#include "opgen/elementwise_buffers.h"
#include "opgen/elementwise_op.h"
#ifdef __CUDACC__
#include "opgen/elementwise.cuh"  // OnCuda::launch's kernels
#endif

namespace opgen {

// A CUDA GPU as a device of the shared elementwise host code.
struct OnCuda {
  using Guard = c10::cuda::CUDAGuard;
  static void check(const at::Tensor& t, const char* op, const char* arg) {
    check_cuda(t, op, arg);
  }
#ifdef __CUDACC__
  // For the CUDA files of elementwise ops rendered before <op>_cuda_binding.cpp existed (kernels
  // and registration in one .cu, through elementwise_op.h): they still build against these
  // headers until `opgen update` renders the current form.
  template <typename T, typename Out, typename Fn, typename... Tensors>
  static void launch(const Out& out, Fn fn, const Tensors&... inputs) {
    launch_elementwise<T>(out, fn, inputs...);
  }
#endif
};

// output = forward(inputs...): kernels(buffers) with the prepared inputs read and the output
// written (ElementwiseBuffers<N, 1>).
template <std::size_t N, class Kernels>
at::Tensor cuda_elementwise_forward(const char* op, const char* const (&names)[N],
                                    const at::Tensor (&inputs)[N], Kernels&& kernels) {
  return elementwise_forward_with<OnCuda>(
      op, names, inputs, [&](const Broadcast& prepared, at::Tensor& output) {
        ElementwiseBuffers<static_cast<int>(N), 1> buffers{};
        buffers.dtype = prepared.dtype;
        buffers.numel = output.numel();
        for (std::size_t i = 0; i < N; ++i) buffers.inputs[i] = prepared.inputs[i].const_data_ptr();
        buffers.outputs[0] = output.mutable_data_ptr();
        buffers.stream = c10::cuda::getCurrentCUDAStream();
        kernels(buffers);
      });
}

// Each input's gradient: kernels(buffers) with the incoming gradient and the prepared inputs read
// and the gradients written (ElementwiseBuffers<N + 1, N>).
template <std::size_t N, class Kernels>
auto cuda_elementwise_backward(const char* op, const char* const (&names)[N],
                               const at::Tensor& grad_output, const at::Tensor (&inputs)[N],
                               Kernels&& kernels) {
  return elementwise_backward_with<OnCuda>(
      op, names, grad_output, inputs,
      [&](const Broadcast& prepared, const at::Tensor& grad, std::array<at::Tensor, N>& grads) {
        ElementwiseBuffers<static_cast<int>(N) + 1, static_cast<int>(N)> buffers{};
        buffers.dtype = prepared.dtype;
        buffers.numel = grad.numel();
        buffers.inputs[0] = grad.const_data_ptr();
        for (std::size_t i = 0; i < N; ++i) {
          buffers.inputs[i + 1] = prepared.inputs[i].const_data_ptr();
          buffers.outputs[i] = grads[i].mutable_data_ptr();
        }
        buffers.stream = c10::cuda::getCurrentCUDAStream();
        kernels(buffers);
      });
}

}  // namespace opgen
