// The host side of every op of the elementwise layout, written once: the checks on the tensor
// arguments (each failure names the argument), broadcasting and dtype promotion of several
// inputs (opgen/broadcast.h), the device guard, the output allocation, the dispatch over the
// floating dtypes and the launch. An op brings only its math: a `Functors` struct whose
// forward<scalar_t>(run, params...) and backward<scalar_t>(run, params...) hand the functor for
// the storage type and the op's arguments to the launcher `run`; and a device, opgen::OnCpu
// (opgen/cpu_loops.h) or opgen::OnCuda (opgen/elementwise.cuh), which says how to check, guard
// and launch.
//
//   m.impl("relu", [](const at::Tensor& x) {
//     return opgen::elementwise_forward<opgen::OnCuda, relu_math::Functors>("relu", {"x"}, {x});
//   });
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

// output = forward(inputs...), elementwise.
template <class Device, class Functors, std::size_t N, class... Params>
at::Tensor elementwise_forward(const char* op, const char* const (&names)[N],
                               const at::Tensor (&inputs)[N], const Params&... params) {
  check_elementwise_inputs<Device>(op, names, inputs);
  const typename Device::Guard device_guard(inputs[0].device());
  const Broadcast prepared = prepare_elementwise_inputs(op, names, inputs);
  at::Tensor output = at::empty(prepared.shape, prepared.inputs[0].options());
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, prepared.dtype, "elementwise_forward", [&] {
        const auto run = [&](auto forward) {
          launch_with_inputs(
              prepared,
              [&](const auto&... in) { Device::template launch<scalar_t>(output, forward, in...); },
              std::make_index_sequence<N>{});
        };
        Functors::template forward<scalar_t>(run, params...);
      });
  return output;
}

// The gradient of each input, from the incoming gradient, in one pass over the output's shape:
// a tensor for one input, a tuple for several (the autograd backward sums each over the
// dimensions its input was broadcast along).
template <class Device, class Functors, std::size_t N, class... Params>
auto elementwise_backward(const char* op, const char* const (&names)[N],
                          const at::Tensor& grad_output, const at::Tensor (&inputs)[N],
                          const Params&... params) {
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
  if constexpr (N == 1) {
    return grads[0];
  } else {
    return std::apply([](auto&... g) { return std::make_tuple(g...); }, grads);
  }
}

}  // namespace opgen
