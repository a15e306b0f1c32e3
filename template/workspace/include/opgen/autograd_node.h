// Autograd nodes written by hand, as PyTorch writes its own (AddmmBackward0 and the like), for
// ops whose training step must cost little host time. A torch::autograd::Function costs more a
// call: a context with a hash map of saved data, per-call records of every input and output, sets
// of dirty and non-differentiable outputs, and the node's demangled C++ name built again in every
// backward (measured on a tiny linear layer's step, CPU: docs/benchmarks/linear_gelu/README.md).
// An op's node derives from torch::autograd::TraceableFunction and keeps its tensors as
// torch::autograd::SavedVariable (version checks and saved-tensor hooks as for PyTorch's nodes).
#pragma once

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/autograd/edge.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/saved_variable.h>
#include <torch/csrc/dynamo/compiled_autograd.h>

#include <memory>
#include <mutex>
#include <optional>
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

// The op's inputs carry no forward-mode tangent: its nodes differentiate in reverse mode only,
// and a tangent would otherwise be dropped without a word.
template <class... Tensors>
void refuse_forward_mode(const char* op, const Tensors&... tensors) {
  TORCH_CHECK(
      !(torch::autograd::isFwGradDefined(tensors) || ...), op,
      ": forward-mode AD (torch.func.jvp, jacfwd, torch.autograd.forward_ad) is not "
      "supported, its kernels differentiate in reverse mode only; use reverse mode (backward, "
      "torch.autograd.grad, torch.func.vjp or jacrev), or compute that part with PyTorch ops");
}

// The op `name` ("generated_ops::<op>") as the dispatcher calls it, which picks its CPU, CUDA or
// Meta kernel; Signature is its C++ type (decltype of its Meta kernel). A node keeps the handle in
// a static at its call site, looked up once.
template <class Signature>
c10::TypedOperatorHandle<Signature> typed_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

// A saved optional parameter as the op takes it again: an absent one is kept as an undefined
// tensor (SavedVariable holds tensors), and comes back as nullopt.
inline std::optional<at::Tensor> present(const at::Tensor& saved) {
  return saved.defined() ? std::optional<at::Tensor>(saved) : std::nullopt;
}

// Held while a node's apply() calls the op's backward: a first derivative (grad mode off) goes
// straight to the backward's kernels, past the Python autograd registration that refuses double
// backward (microseconds a step, as long as a small layer's GEMMs); with create_graph it goes
// through that registration, which raises.
class FirstDerivativeGuard {
 public:
  FirstDerivativeGuard() {
    if (!c10::GradMode::is_enabled()) below_autograd_.emplace();
  }

 private:
  std::optional<at::AutoDispatchBelowADInplaceOrView> below_autograd_;
};

// What every hand-written node does with the tensors it keeps, written once: hands them to compiled
// autograd (torch._dynamo.compiled_autograd traces the backward through compiled_args, then
// apply_with_saved with the saved tensors swapped for the trace's) and frees them once the
// backward has run (release_variables). The op's node derives from KeepingNode<itself> (OpNode: not
// `Node`, which names torch::autograd::Node inside any node), writes name() and apply(), and lists
// its SavedVariables in
//   template <class Self, class F> static void each_saved(Self& self, F&& f)
// (f(self.x_); f(self.weight_); ...); a node with other attributes compiled autograd must see (a
// string, a number) hides collect_attributes.
template <class OpNode>
struct KeepingNode : public torch::autograd::TraceableFunction {
  void collect_attributes(torch::dynamo::autograd::CompiledNodeArgs& /*args*/) const {}

  void compiled_args(torch::dynamo::autograd::CompiledNodeArgs& args) const override {
    const OpNode& node = static_cast<const OpNode&>(*this);
    OpNode::each_saved(
        node, [&](const torch::autograd::SavedVariable& saved) { args.collect(saved, false); });
    node.collect_attributes(args);
  }

  torch::autograd::variable_list apply_with_saved(
      const torch::autograd::variable_list& grads,
      torch::dynamo::autograd::SwapSavedVariables& swap) override {
    OpNode& node = static_cast<OpNode&>(*this);
    OpNode::each_saved(node, [&](torch::autograd::SavedVariable& saved) { swap.before(saved); });
    torch::autograd::variable_list result = apply(torch::autograd::variable_list(grads));
    OpNode::each_saved(node, [&](torch::autograd::SavedVariable& saved) { swap.after(saved); });
    return result;
  }

  void release_variables() override {
    const std::lock_guard<std::mutex> lock(mutex_);
    OpNode::each_saved(static_cast<OpNode&>(*this),
                       [](torch::autograd::SavedVariable& saved) { saved.reset_data(); });
  }
};

}  // namespace opgen::autograd
