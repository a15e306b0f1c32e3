// Multilayer perceptrons (the mlp layout, `opgen new <op> --kind mlp`): y = f_L(...f_1(x)) with
// f_l(h) = act_l(h @ W_l^T + b_l), act the hidden activation between layers and the output
// activation after the last. This header holds what the CPU, CUDA and Meta kernels share: the
// network's description, the argument checks, the outputs' shapes, the layout of what the forward
// keeps for the backward, and the unfused path through ATen, which is the CPU kernel and the CUDA
// kernel for float64 and for exact float32 (the fused kernels, opgen/mlp.cuh, run the tensor-core
// types: float16, bfloat16 and float32 as TF32 where allow_tf32 says so).
//
// What the backward reads ("saved", (rows, saved_columns)), one block of columns each:
//   a_1 .. a_{L-1}   each hidden layer's output (the next layer's input: its weight gradient)
//   z_1 .. z_{L-1}   the hidden pre-activations, only for GELU and SiLU (ReLU's derivative reads a)
//   z_L              the output pre-activation, only for an output GELU or SiLU (ReLU's reads y)
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/silu.h>
#include <ATen/ops/silu_backward.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/threshold_backward.h>
#include <c10/macros/Macros.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>
#include <vector>

#include "opgen/checks.h"

namespace opgen::mlp {

enum class Activation : int { kNone, kRelu, kGelu, kGeluTanh, kSilu };

// Whether the activation's derivative reads the pre-activation (else its output, or nothing).
C10_HOST_DEVICE constexpr bool reads_preactivation(Activation activation) {
  return activation == Activation::kGelu || activation == Activation::kGeluTanh ||
         activation == Activation::kSilu;
}

// The network an op was rendered for: its widths (input, hidden..., output), activations, bias.
struct Network {
  std::vector<int64_t> widths;
  Activation hidden;
  Activation output;
  bool bias;

  int layers() const { return static_cast<int>(widths.size()) - 1; }
  Activation activation(int layer) const { return layer + 1 == layers() ? output : hidden; }

  // Columns of `saved` where layer l's (1-based) output a_l, and its pre-activation z_l, begin.
  int64_t output_column(int layer) const {
    int64_t column = 0;
    for (int l = 1; l < layer; ++l) column += widths[l];
    return column;
  }
  int64_t preactivation_column(int layer) const {
    int64_t column = output_column(layers());  // past a_1 .. a_{L-1}
    if (reads_preactivation(hidden)) {
      for (int l = 1; l < layer; ++l) column += widths[l];
    }
    return column;
  }
  int64_t saved_columns() const {
    int64_t columns = preactivation_column(layers());
    return reads_preactivation(output) ? columns + widths.back() : columns;
  }
};

inline std::string weight_name(int layer) {
  return "w" + std::to_string(layer);
}
inline std::string bias_name(int layer) {
  return "b" + std::to_string(layer);
}

// x (..., widths[0]); weights[l] (widths[l+1], widths[l]) as nn.Linear stores them; biases[l]
// (widths[l+1]) or none; one dtype, one device.
inline void check_arguments(const Network& net, const at::Tensor& x,
                            const std::vector<at::Tensor>& weights,
                            const std::vector<at::Tensor>& biases, const char* op) {
  check_floating(x, op, "x");
  TORCH_CHECK(x.dim() >= 1, op, ": argument 'x' must have at least 1 dimension (..., ",
              std::to_string(net.widths[0]), "), but got a 0-d tensor");
  TORCH_CHECK(x.size(-1) == net.widths[0], op, ": argument 'x' must have ",
              std::to_string(net.widths[0]),
              " features in its last dimension (the network's input width), but got shape ",
              shape_string(x.sizes()));
  for (int l = 0; l < net.layers(); ++l) {
    const std::string w = weight_name(l + 1);
    check_same_device(weights[l], w.c_str(), x, "x", op);
    check_same_dtype(weights[l], w.c_str(), x, "x", op);
    TORCH_CHECK(weights[l].dim() == 2 && weights[l].size(0) == net.widths[l + 1] &&
                    weights[l].size(1) == net.widths[l],
                op, ": argument '", w, "' must have shape [", std::to_string(net.widths[l + 1]),
                ", ", std::to_string(net.widths[l]),
                "] (out_features, in_features, as nn.Linear stores it), but got ",
                shape_string(weights[l].sizes()));
    if (net.bias) {
      const std::string b = bias_name(l + 1);
      check_same_device(biases[l], b.c_str(), x, "x", op);
      check_same_dtype(biases[l], b.c_str(), x, "x", op);
      TORCH_CHECK(biases[l].dim() == 1 && biases[l].size(0) == net.widths[l + 1], op,
                  ": argument '", b, "' must have shape [", std::to_string(net.widths[l + 1]),
                  "], but got ", shape_string(biases[l].sizes()));
    }
  }
}

inline int64_t row_count(const at::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

// (y, saved): y is x's shape with the output width last; saved is (rows, saved_columns) when
// `keep` (a gradient will be needed), else empty.
inline std::tuple<at::Tensor, at::Tensor> empty_outputs(const Network& net, const at::Tensor& x,
                                                        bool keep) {
  std::vector<c10::SymInt> shape(x.sym_sizes().begin(), x.sym_sizes().end());
  shape.back() = net.widths.back();
  c10::SymInt rows = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) rows = rows * shape[d];
  at::Tensor y = at::empty_symint(shape, x.options());
  at::Tensor saved = keep ? at::empty_symint({rows, c10::SymInt(net.saved_columns())}, x.options())
                          : at::empty({0}, x.options());
  return {y, saved};
}

// Each gradient of its input's shape: x, then w1 (b1), w2 (b2), ... in argument order.
inline std::vector<at::Tensor> empty_gradients(const Network& net, const at::Tensor& x,
                                               const std::vector<at::Tensor>& weights,
                                               const std::vector<at::Tensor>& biases) {
  std::vector<at::Tensor> grads{at::empty_symint(x.sym_sizes(), x.options())};
  for (int l = 0; l < net.layers(); ++l) {
    grads.push_back(at::empty_symint(weights[l].sym_sizes(), x.options()));
    if (net.bias) grads.push_back(at::empty_symint(biases[l].sym_sizes(), x.options()));
  }
  return grads;
}

inline at::Tensor activate(Activation activation, const at::Tensor& z) {
  switch (activation) {
    case Activation::kRelu:
      return at::relu(z);
    case Activation::kGelu:
      return at::gelu(z, "none");
    case Activation::kGeluTanh:
      return at::gelu(z, "tanh");
    case Activation::kSilu:
      return at::silu(z);
    default:
      return z;
  }
}

// The gradient at the pre-activation z from the gradient at the output a = act(z).
inline at::Tensor activation_backward(Activation activation, const at::Tensor& grad,
                                      const at::Tensor& z, const at::Tensor& a) {
  switch (activation) {
    case Activation::kRelu:
      return at::threshold_backward(grad, a, 0);  // ReLU's output is positive where it passes
    case Activation::kGelu:
      return at::gelu_backward(grad, z, "none");
    case Activation::kGeluTanh:
      return at::gelu_backward(grad, z, "tanh");
    case Activation::kSilu:
      return at::silu_backward(grad, z);
    default:
      return grad;
  }
}

// The forward by ATen, layer by layer in x's dtype (ATen's GEMMs honour allow_tf32 on CUDA):
// x2 (rows, widths[0]) into y2 (rows, widths[L]); `saved` (rows, saved_columns) filled when
// defined.
inline void forward_aten(const Network& net, const at::Tensor& x2,
                         const std::vector<at::Tensor>& weights,
                         const std::vector<at::Tensor>& biases, at::Tensor& y2,
                         const at::Tensor& saved) {
  at::Tensor h = x2;
  for (int l = 1; l <= net.layers(); ++l) {
    const at::Tensor& w = weights[l - 1];
    at::Tensor z = net.bias ? at::addmm(biases[l - 1], h, w.t()) : at::mm(h, w.t());
    const Activation act = net.activation(l - 1);
    at::Tensor a = activate(act, z);
    if (saved.defined()) {
      if (l < net.layers()) saved.narrow(1, net.output_column(l), net.widths[l]).copy_(a);
      if (reads_preactivation(act)) {
        saved.narrow(1, net.preactivation_column(l), net.widths[l]).copy_(z);
      }
    }
    h = a;
  }
  y2.copy_(h);
}

// The backward by ATen from what the forward kept: `grads` (empty_gradients) written in place.
inline void backward_aten(const Network& net, const at::Tensor& grad2, const at::Tensor& x2,
                          const std::vector<at::Tensor>& weights, const at::Tensor& y2,
                          const at::Tensor& saved, std::vector<at::Tensor>& grads) {
  const int layers = net.layers();
  const auto column = [&](int64_t start, int layer) {
    return saved.narrow(1, start, net.widths[layer]);
  };
  const Activation out = net.output;
  at::Tensor g = activation_backward(
      out, grad2, reads_preactivation(out) ? column(net.preactivation_column(layers), layers) : y2,
      y2);
  const int per_layer = net.bias ? 2 : 1;
  for (int l = layers; l >= 1; --l) {
    const at::Tensor input = l > 1 ? column(net.output_column(l - 1), l - 1) : x2;
    at::Tensor& grad_w = grads[1 + per_layer * (l - 1)];
    at::mm_out(grad_w, g.t(), input);
    if (net.bias) at::sum_out(grads[2 + per_layer * (l - 1)], g, {0});
    at::Tensor d = at::mm(g, weights[l - 1]);
    if (l > 1) {
      const at::Tensor a = column(net.output_column(l - 1), l - 1);
      const at::Tensor z =
          reads_preactivation(net.hidden) ? column(net.preactivation_column(l - 1), l - 1) : a;
      g = activation_backward(net.hidden, d, z, a);
    } else {
      grads[0].view({x2.size(0), x2.size(1)}).copy_(d);
    }
  }
}

// The whole forward by ATen, for x of any leading shape: the CPU kernel, and the CUDA kernel's
// path for float64 and exact float32. `saved` is empty unless a gradient will be needed.
inline void forward_unfused(const Network& net, const at::Tensor& x,
                            const std::vector<at::Tensor>& weights,
                            const std::vector<at::Tensor>& biases, at::Tensor& y,
                            const at::Tensor& saved) {
  const int64_t rows = row_count(x);
  at::Tensor y2 = y.view({rows, net.widths.back()});
  forward_aten(net, x.reshape({rows, net.widths[0]}), weights, biases, y2,
               saved.dim() == 2 ? saved : at::Tensor());
}

// What the forward kept, or (for a caller of the raw op that kept nothing) the same recomputed.
inline at::Tensor saved_or_recomputed(const Network& net, const at::Tensor& x,
                                      const std::vector<at::Tensor>& weights,
                                      const std::vector<at::Tensor>& biases,
                                      const at::Tensor& saved) {
  const int64_t rows = row_count(x);
  if (saved.dim() == 2 && saved.size(0) == rows && saved.size(1) == net.saved_columns()) {
    return saved;
  }
  at::Tensor kept = at::empty({rows, net.saved_columns()}, x.options());
  at::Tensor y2 = at::empty({rows, net.widths.back()}, x.options());
  forward_aten(net, x.reshape({rows, net.widths[0]}), weights, biases, y2, kept);
  return kept;
}

// The whole backward by ATen: every gradient (x's, then each layer's weight and bias).
inline std::vector<at::Tensor> backward_unfused(const Network& net, const at::Tensor& grad_y,
                                                const at::Tensor& x,
                                                const std::vector<at::Tensor>& weights,
                                                const std::vector<at::Tensor>& biases,
                                                const at::Tensor& y, const at::Tensor& saved) {
  std::vector<at::Tensor> grads = empty_gradients(net, x, weights, biases);
  const int64_t rows = row_count(x);
  const at::Tensor kept = saved_or_recomputed(net, x, weights, biases, saved);
  backward_aten(net, grad_y.reshape({rows, net.widths.back()}), x.reshape({rows, net.widths[0]}),
                weights, y.reshape({rows, net.widths.back()}), kept, grads);
  return grads;
}

}  // namespace opgen::mlp
