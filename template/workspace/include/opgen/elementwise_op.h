// The host side of every op of the elementwise layout, written once: the checks on the tensor
// arguments (each failure names the argument), broadcasting and dtype promotion of several
// inputs (opgen/broadcast.h), the device guard, the output allocation, then the op's kernels.
// On the CPU (opgen::OnCpu, opgen/cpu_loops.h) the op brings only its math: a `Functors` struct
// whose forward<scalar_t>(run, params...) and backward<scalar_t>(run, params...) hand the functor
// for the storage type and the op's arguments to the launcher `run`, dispatched here over the
// floating dtypes:
//
//   m.impl("relu", [](const at::Tensor& x) {
//     return opgen::elementwise_forward<opgen::OnCpu, relu_math::Functors>("relu", {"x"}, {x});
//   });
//
// On CUDA the op's binding hands the prepared tensors to its kernel file as buffers, and the same
// Functors run there (opgen/elementwise_cuda.h, opgen/elementwise.cuh).
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <array>
#include <cstddef>
#include <tuple>
#include <utility>

#include "opgen/broadcast.h"
#include "opgen/checks.h"

namespace opgen {

template <class Device, std::size_t N>
void check_elementwise_inputs(const char* op, const char* const (&names)[N],
                              const at::Tensor (&inputs)[N]) {
  for (std::size_t i = 0; i < N; ++i) Device::check(inputs[i], op, names[i]);
  for (std::size_t i = 0; i < N; ++i) check_floating(inputs[i], op, names[i]);
  for (std::size_t i = 1; i < N; ++i)
    check_same_device(inputs[0], names[0], inputs[i], names[i], op);
}

// One input is only made contiguous (it keeps its dtype); several broadcast together and promote
// as PyTorch's binary ops do. The kernels walk flat memory, so anything else is copied first.
template <std::size_t N>
Broadcast prepare_elementwise_inputs(const char* op, const char* const (&names)[N],
                                     const at::Tensor (&inputs)[N]) {
  if constexpr (N == 1) {
    return Broadcast{
        at::DimVector(inputs[0].sizes()), inputs[0].scalar_type(), {inputs[0].contiguous()}};
  } else {
    return broadcast_inputs(c10::ArrayRef<at::Tensor>(inputs, N),
                            c10::ArrayRef<const char*>(names, N), op);
  }
}

// launch(inputs[0], ..., inputs[N - 1]): the prepared inputs as the launchers' variadic arguments.
template <typename Launch, std::size_t... I>
void launch_with_inputs(const Broadcast& prepared, Launch&& launch, std::index_sequence<I...>) {
  launch(prepared.inputs[I]...);
}

// output = forward(inputs...), elementwise: the checks, the device guard, the prepared inputs and
// the output, then run(prepared, output) computes it.
template <class Device, std::size_t N, class Run>
at::Tensor elementwise_forward_with(const char* op, const char* const (&names)[N],
                                    const at::Tensor (&inputs)[N], Run&& run) {
  check_elementwise_inputs<Device>(op, names, inputs);
  const typename Device::Guard device_guard(inputs[0].device());
  const Broadcast prepared = prepare_elementwise_inputs(op, names, inputs);
  at::Tensor output = at::empty(prepared.shape, prepared.inputs[0].options());
  run(prepared, output);
  return output;
}

// The gradient of each input, from the incoming gradient, in one pass over the output's shape:
// the checks, the guard, the prepared inputs, the contiguous incoming gradient and the gradients,
// then run(prepared, grad, grads) computes them. A tensor for one input, a tuple for several (the
// autograd backward sums each over the dimensions its input was broadcast along).
template <class Device, std::size_t N, class Run>
auto elementwise_backward_with(const char* op, const char* const (&names)[N],
                               const at::Tensor& grad_output, const at::Tensor (&inputs)[N],
                               Run&& run) {
  Device::check(grad_output, op, "grad_output");
  check_elementwise_inputs<Device>(op, names, inputs);
  check_same_device(grad_output, "grad_output", inputs[0], names[0], op);
  const typename Device::Guard device_guard(inputs[0].device());
  if constexpr (N == 1) {
    check_same_dtype(grad_output, "grad_output", inputs[0], names[0], op);
    check_same_shape(grad_output, "grad_output", inputs[0], names[0], op);
  }
  const Broadcast prepared = prepare_elementwise_inputs(op, names, inputs);
  if constexpr (N > 1) check_like_output(grad_output, prepared, op);
  const at::Tensor grad = grad_output.contiguous();
  std::array<at::Tensor, N> grads;
  for (at::Tensor& g : grads) g = at::empty(prepared.shape, grad.options());
  run(prepared, grad, grads);
  if constexpr (N == 1) {
    return grads[0];
  } else {
    return std::apply([](auto&... g) { return std::make_tuple(g...); }, grads);
  }
}

// The forward with the op's math in this file: Device::launch runs the op's Functors over the
// prepared inputs (the CPU kernels; the CUDA kernels are in their own file,
// opgen/elementwise_cuda.h).
template <class Device, class Functors, std::size_t N, class... Params>
at::Tensor elementwise_forward(const char* op, const char* const (&names)[N],
                               const at::Tensor (&inputs)[N], const Params&... params) {
  return elementwise_forward_with<Device>(
      op, names, inputs, [&](const Broadcast& prepared, at::Tensor& output) {
        AT_DISPATCH_FLOATING_TYPES_AND2(
            at::kHalf, at::kBFloat16, prepared.dtype, "elementwise_forward", [&] {
              const auto run = [&](auto forward) {
                launch_with_inputs(
                    prepared,
                    [&](const auto&... in) {
                      Device::template launch<scalar_t>(output, forward, in...);
                    },
                    std::make_index_sequence<N>{});
              };
              Functors::template forward<scalar_t>(run, params...);
            });
      });
}

// The backward with the op's math in this file, likewise.
template <class Device, class Functors, std::size_t N, class... Params>
auto elementwise_backward(const char* op, const char* const (&names)[N],
                          const at::Tensor& grad_output, const at::Tensor (&inputs)[N],
                          const Params&... params) {
  return elementwise_backward_with<Device>(
      op, names, grad_output, inputs,
      [&](const Broadcast& prepared, const at::Tensor& grad, std::array<at::Tensor, N>& grads) {
        AT_DISPATCH_FLOATING_TYPES_AND2(
            at::kHalf, at::kBFloat16, prepared.dtype, "elementwise_backward", [&] {
              const auto run = [&](auto backward) {
                launch_with_inputs(
                    prepared,
                    [&](const auto&... in) {
                      if constexpr (N == 1) {
                        Device::template launch<scalar_t>(grads[0], backward, grad, in...);
                      } else {
                        Device::template launch<scalar_t>(grads, backward, grad, in...);
                      }
                    },
                    std::make_index_sequence<N>{});
              };
              Functors::template backward<scalar_t>(run, params...);
            });
      });
}

}  // namespace opgen

#ifdef __CUDACC__
// opgen::OnCuda, for the CUDA files of elementwise ops rendered before <op>_cuda_binding.cpp
// existed, which include this header and opgen/elementwise.cuh.
#include "opgen/elementwise_cuda.h"
#endif
