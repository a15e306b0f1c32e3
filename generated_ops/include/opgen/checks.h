// Input checks shared by every op. Each failure raises a RuntimeError that names the op, the
// argument, what it got and what it needs, so the user can fix the call without reading C++.
//
// The macros read the op's name from OPGEN_OP, which each source file defines once:
//     #define OPGEN_OP "softmax"
//
// Numbers and shapes in the messages are formatted with std::to_string, never streamed: on the
// GPU machine (torch 2.11, its g++), streaming an integer inside an extension's TORCH_CHECK
// message crashed the process in libstdc++'s number formatting instead of raising the error.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <cstdint>
#include <string>

namespace opgen {

// "[2, 3, 4]"
inline std::string shape_string(c10::IntArrayRef values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

inline void check_cuda(const at::Tensor& t, const char* op, const char* arg) {
  TORCH_CHECK(t.is_cuda(), op, ": argument '", arg, "' must be a CUDA tensor, but got a tensor on ",
              t.device(), "; move it with .cuda() or .to('cuda')");
}

inline void check_cpu(const at::Tensor& t, const char* op, const char* arg) {
  TORCH_CHECK(t.is_cpu(), op, ": argument '", arg, "' must be a CPU tensor, but got a tensor on ",
              t.device());
}

inline void check_contiguous(const at::Tensor& t, const char* op, const char* arg) {
  TORCH_CHECK(t.is_contiguous(), op, ": argument '", arg, "' must be contiguous, but got strides ",
              shape_string(t.strides()), " for sizes ", shape_string(t.sizes()),
              "; call .contiguous() first");
}

inline void check_floating(const at::Tensor& t, const char* op, const char* arg) {
  const auto dtype = t.scalar_type();
  const bool supported =
      dtype == at::kFloat || dtype == at::kDouble || dtype == at::kHalf || dtype == at::kBFloat16;
  TORCH_CHECK(supported, op, ": argument '", arg,
              "' must be float32, float64, float16 or bfloat16, but got ", dtype,
              "; convert it with .float()");
}

inline void check_same_device(const at::Tensor& a, const char* arg_a, const at::Tensor& b,
                              const char* arg_b, const char* op) {
  TORCH_CHECK(a.device() == b.device(), op, ": arguments '", arg_a, "' and '", arg_b,
              "' must be on the same device, but got ", a.device(), " and ", b.device());
}

inline void check_same_dtype(const at::Tensor& a, const char* arg_a, const at::Tensor& b,
                             const char* arg_b, const char* op) {
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": arguments '", arg_a, "' and '", arg_b,
              "' must have the same dtype, but got ", a.scalar_type(), " and ", b.scalar_type());
}

inline void check_same_shape(const at::Tensor& a, const char* arg_a, const at::Tensor& b,
                             const char* arg_b, const char* op) {
  TORCH_CHECK(a.sizes() == b.sizes(), op, ": arguments '", arg_a, "' and '", arg_b,
              "' must have the same shape, but got ", shape_string(a.sizes()), " and ",
              shape_string(b.sizes()));
}

// Wraps a possibly negative dimension the way torch does, or fails naming the valid range.
inline int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  const int64_t rank = ndim == 0 ? 1 : ndim;  // a 0-d tensor behaves as one of shape [1]
  TORCH_CHECK(dim >= -rank && dim < rank, op, ": argument 'dim' must be in the range [",
              std::to_string(-rank), ", ", std::to_string(rank - 1), "] for a tensor of ",
              std::to_string(ndim), " dimensions, but got ", std::to_string(dim));
  return dim < 0 ? dim + rank : dim;
}

}  // namespace opgen

#define CHECK_CUDA(x) ::opgen::check_cuda(x, OPGEN_OP, #x)
#define CHECK_CPU(x) ::opgen::check_cpu(x, OPGEN_OP, #x)
#define CHECK_CONTIGUOUS(x) ::opgen::check_contiguous(x, OPGEN_OP, #x)
#define CHECK_FLOATING(x) ::opgen::check_floating(x, OPGEN_OP, #x)
#define CHECK_SAME_DEVICE(a, b) ::opgen::check_same_device(a, #a, b, #b, OPGEN_OP)
#define CHECK_SAME_DTYPE(a, b) ::opgen::check_same_dtype(a, #a, b, #b, OPGEN_OP)
#define CHECK_SAME_SHAPE(a, b) ::opgen::check_same_shape(a, #a, b, #b, OPGEN_OP)
