// Autograd nodes written by hand, as PyTorch writes its own (AddmmBackward0 and the like), for
// ops whose training step must cost little host time. A torch::autograd::Function costs more a
// call: a context with a hash map of saved data, per-call records of every input and output, sets
// of dirty and non-differentiable outputs, and the node's demangled C++ name built again in every
// backward (measured on a tiny linear layer's step, CPU: docs/benchmarks/linear_gelu/README.md).
// An op's node derives from torch::autograd::TraceableFunction and keeps its tensors as
// torch::autograd::SavedVariable (version checks and saved-tensor hooks as for PyTorch's nodes).
#pragma once

#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/function.h>

#include <memory>
#include <type_traits>

namespace opgen::autograd {

// A new node, held the way this PyTorch's autograd holds nodes: std::shared_ptr in older releases,
// c10::intrusive_ptr in newer ones (the other branch is never instantiated).
template <typename NodeType>
auto make_node() {
  using Held = decltype(torch::autograd::Edge::function);
  if constexpr (std::is_same_v<Held, std::shared_ptr<torch::autograd::Node>>) {
    return std::make_shared<NodeType>();
  } else {
    return c10::make_intrusive<NodeType>();
  }
}

}  // namespace opgen::autograd
