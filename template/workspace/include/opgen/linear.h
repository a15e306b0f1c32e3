// Linear layers with an activation (the linear layout: linear_gelu, `opgen new --kind linear`):
// y = act(x @ weight^T + bias) for x of any leading shape. This header holds what the CPU and
// CUDA kernels share: the argument checks, the outputs' shapes (which the Meta kernels return
// too), and the unfused path through ATen (addmm, then the activation), which is the CPU kernel,
// the CUDA kernel for float64, and the CUDA fallback for whatever cuBLASLt's fused epilogue
// refuses (opgen/linear_cublaslt.h).
//
// The forward writes `out` and, when a gradient will be needed, what the backward reads: the
// biased pre-activation for GELU and formula activations (ReLU's backward reads `out`, the
// identity's nothing).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/gelu_backward.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/threshold_backward.h>
#include <c10/util/Exception.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "opgen/checks.h"

namespace opgen::linear {

enum class Activation { kNone, kRelu, kGelu, kGeluTanh, kFormula };

// gelu's `approximate` argument ("none" or "tanh"), as F.gelu takes it.
inline Activation gelu_activation(c10::string_view approximate, const char* op) {
  if (approximate == "tanh") return Activation::kGeluTanh;
  TORCH_CHECK(approximate == "none", op,
              ": argument 'approximate' must be \"none\" or \"tanh\", but got \"",
              std::string(approximate), "\"");
  return Activation::kGelu;
}

// Whether the backward reads the pre-activation (else `out` or nothing).
inline bool keeps_preactivation(Activation activation) {
  return activation == Activation::kGelu || activation == Activation::kGeluTanh ||
         activation == Activation::kFormula;
}

inline void check_arguments(const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias, const char* op) {
  check_floating(x, op, "x");
  check_same_device(weight, "weight", x, "x", op);
  check_same_dtype(weight, "weight", x, "x", op);
  TORCH_CHECK(weight.dim() == 2, op,
              ": argument 'weight' must be 2-D (out_features, in_features), but got shape ",
              shape_string(weight.sizes()));
  TORCH_CHECK(
      x.dim() >= 1, op,
      ": argument 'x' must have at least 1 dimension (..., in_features), but got a 0-d tensor");
  TORCH_CHECK(x.size(-1) == weight.size(1), op, ": argument 'x' has ", std::to_string(x.size(-1)),
              " features in its last dimension, but 'weight' of shape ",
              shape_string(weight.sizes()), " takes ", std::to_string(weight.size(1)));
  if (bias.has_value()) {
    check_same_device(*bias, "bias", x, "x", op);
    check_same_dtype(*bias, "bias", x, "x", op);
    TORCH_CHECK(bias->dim() == 1 && bias->size(0) == weight.size(0), op,
                ": argument 'bias' must have shape [", std::to_string(weight.size(0)),
                "] (out_features), but got ", shape_string(bias->sizes()));
  }
}

// x's shape with the last dimension replaced by out_features (symbolic, for the Meta kernels).
inline std::vector<c10::SymInt> output_shape(const at::Tensor& x, const at::Tensor& weight) {
  std::vector<c10::SymInt> shape(x.sym_sizes().begin(), x.sym_sizes().end());
  shape.back() = weight.sym_size(0);
  return shape;
}

// (out, preactivation): preactivation has out's shape when `keep` (a gradient will be needed and
// the activation's backward reads it), else it is empty.
inline std::tuple<at::Tensor, at::Tensor> empty_outputs(const at::Tensor& x,
                                                        const at::Tensor& weight, bool keep) {
  const auto shape = output_shape(x, weight);
  at::Tensor out = at::empty_symint(shape, x.options());
  at::Tensor preactivation =
      keep ? at::empty_symint(shape, x.options()) : at::empty({0}, x.options());
  return {out, preactivation};
}

// The gradients asked for (each input's shape); the others empty.
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> empty_gradients(
    const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
    bool need_x, bool need_weight, bool need_bias) {
  const auto none = [&] {
    return at::empty({0}, x.options());
  };
  return {need_x ? at::empty_symint(x.sym_sizes(), x.options()) : none(),
          need_weight ? at::empty_symint(weight.sym_sizes(), weight.options()) : none(),
          need_bias && bias.has_value() ? at::empty_symint(bias->sym_sizes(), bias->options())
                                        : none()};
}

// x as rows (M, K): a view where x's strides allow one, else a contiguous copy.
inline int64_t row_count(const at::Tensor& x) {
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) rows *= x.size(d);
  return rows;
}

// A tensor of x's leading shape as rows (rows, cols): the tensor itself where it is 2-D already
// (no view made: a small layer's training step is host-bound, and each view is time), else a view
// where its strides allow one, else a contiguous copy.
inline at::Tensor as_rows(const at::Tensor& t, int64_t rows, int64_t cols) {
  return t.dim() == 2 ? t : t.reshape({rows, cols});
}

inline at::Tensor rows_of(const at::Tensor& x) {
  return as_rows(x, row_count(x), x.size(-1));
}  // not -1: K may be 0

// ReLU, GELU: the activation of `pre` written into `out` (both (M, N)); the identity copies.
inline void activate(Activation activation, const at::Tensor& pre, at::Tensor& out) {
  switch (activation) {
    case Activation::kRelu:
      at::clamp_min_out(out, pre, 0);
      break;
    case Activation::kGelu:
      at::gelu_out(out, pre, "none");
      break;
    case Activation::kGeluTanh:
      at::gelu_out(out, pre, "tanh");
      break;
    default:
      if (!out.is_same(pre)) out.copy_(pre);
  }
}

// The gradient at the pre-activation, from the output's gradient: the activation's derivative.
inline at::Tensor activation_backward(Activation activation, const at::Tensor& grad,
                                      const at::Tensor& pre, const at::Tensor& out) {
  switch (activation) {
    case Activation::kRelu:
      return at::threshold_backward(grad, out,
                                    0);  // relu's output is positive exactly where it passes
    case Activation::kGelu:
      return at::gelu_backward(grad, pre, "none");
    case Activation::kGeluTanh:
      return at::gelu_backward(grad, pre, "tanh");
    default:
      return grad;
  }
}

// x @ weight^T (+ bias) into `pre` (M, N) by ATen (which honours allow_tf32 on CUDA).
inline void gemm_aten(const at::Tensor& rows, const at::Tensor& weight,
                      const std::optional<at::Tensor>& bias, at::Tensor& pre) {
  if (bias.has_value()) {
    at::addmm_out(pre, *bias, rows, weight.t());
  } else {
    at::mm_out(pre, rows, weight.t());
  }
}

// The unfused forward: the GEMM with the bias, then the activation. `pre2` is the kept
// pre-activation as (M, N), or undefined; `out2` the output as (M, N). Formula activations are
// applied by the caller.
inline void forward_aten(Activation activation, const at::Tensor& x, const at::Tensor& weight,
                         const std::optional<at::Tensor>& bias, at::Tensor& out2,
                         const at::Tensor& pre2) {
  const at::Tensor rows = rows_of(x);
  if (pre2.defined() || activation == Activation::kFormula) {
    at::Tensor pre = pre2.defined() ? pre2 : at::empty_like(out2);
    gemm_aten(rows, weight, bias, pre);
    activate(activation, pre, out2);
  } else {
    gemm_aten(rows, weight, bias, out2);
    activate(activation, out2, out2);
  }
}

// The input gradients from the pre-activation's gradient (M, N): dX = g @ W, dW = g^T @ X,
// db = the sum of g over rows. Each one asked for is written into its (preallocated) tensor.
inline void input_gradients_aten(const at::Tensor& grad_pre, const at::Tensor& x,
                                 const at::Tensor& weight, at::Tensor& grad_x,
                                 at::Tensor& grad_weight, at::Tensor& grad_bias, bool need_x,
                                 bool need_weight, bool need_bias) {
  if (need_x) {
    at::Tensor grad_rows = as_rows(grad_x, grad_pre.size(0), weight.size(1));
    at::mm_out(grad_rows, grad_pre, weight);
  }
  if (need_weight) at::mm_out(grad_weight, grad_pre.t(), rows_of(x));
  if (need_bias) at::sum_out(grad_bias, grad_pre, {0});
}

// The pre-activation of a backward whose forward did not keep it (torch.library.opcheck and other
// callers of the raw op with keep_preactivation=False): computed again.
inline at::Tensor recompute_preactivation(const at::Tensor& x, const at::Tensor& weight,
                                          const std::optional<at::Tensor>& bias) {
  const at::Tensor rows = rows_of(x);
  return bias.has_value() ? at::addmm(*bias, rows, weight.t()) : at::mm(rows, weight.t());
}

}  // namespace opgen::linear
