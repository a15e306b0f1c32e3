// The tensor inputs of an elementwise op with several of them, made ready for a kernel that walks
// flat memory: broadcast to one shape and promoted to one dtype as PyTorch does for `x * y`,
// with errors that name the arguments.
//
// The kernels (CPU and CUDA) read every input at the same flat index, so an input that has to be
// broadcast, converted or made contiguous is first copied to a contiguous tensor of the full
// shape and dtype. That costs, per such input, one more read of it plus a write and a read of
// the full shape: a broadcast input makes the op up to about twice as slow as the equal-shape
// case, where nothing is copied and the kernel reads each input once. Ops that broadcast on a hot
// path are better served by a kernel that indexes each input by its own strides.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/DimVector.h>
#include <ATen/ExpandUtils.h>
#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "opgen/checks.h"

namespace opgen {

struct Broadcast {
  at::DimVector shape;             // the output's shape
  at::ScalarType dtype;            // the output's dtype: the kernel's storage type
  std::vector<at::Tensor> inputs;  // each input, contiguous, of `shape` and `dtype`
};

inline bool broadcastable(c10::IntArrayRef a, c10::IntArrayRef b) {
  const size_t common = std::min(a.size(), b.size());
  for (size_t i = 1; i <= common; ++i) {
    const int64_t size_a = a[a.size() - i];
    const int64_t size_b = b[b.size() - i];
    if (size_a != size_b && size_a != 1 && size_b != 1) return false;
  }
  return true;
}

// torch.result_type among floating-point tensors: the tensors with dimensions decide, 0-d
// tensors only when every input is 0-d (a float32 matrix times a 0-d float64 tensor is float32).
inline at::ScalarType promoted_dtype(c10::ArrayRef<at::Tensor> tensors) {
  const bool any_dimensioned =
      std::any_of(tensors.begin(), tensors.end(), [](const at::Tensor& t) { return t.dim() > 0; });
  at::ScalarType dtype = at::ScalarType::Undefined;
  for (const at::Tensor& t : tensors) {
    if (any_dimensioned && t.dim() == 0) continue;
    dtype = dtype == at::ScalarType::Undefined ? t.scalar_type()
                                               : c10::promoteTypes(dtype, t.scalar_type());
  }
  return dtype;
}

// The caller has checked that every input is a floating-point tensor on one device. Inputs that
// do not broadcast are refused by the first pair that does not (pairwise is enough: sizes that
// agree two by two agree all together).
inline Broadcast broadcast_inputs(c10::ArrayRef<at::Tensor> tensors,
                                  c10::ArrayRef<const char*> names, const char* op) {
  TORCH_INTERNAL_ASSERT(!tensors.empty() && tensors.size() == names.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (size_t j = i + 1; j < tensors.size(); ++j) {
      TORCH_CHECK(broadcastable(tensors[i].sizes(), tensors[j].sizes()), op, ": arguments '",
                  names[i], "' and '", names[j],
                  "' must have shapes that broadcast together, but got ",
                  shape_string(tensors[i].sizes()), " and ", shape_string(tensors[j].sizes()));
    }
  }
  Broadcast broadcast{{}, promoted_dtype(tensors), {}};
  for (const at::Tensor& t : tensors)
    broadcast.shape = at::infer_size_dimvector(broadcast.shape, t.sizes());
  broadcast.inputs.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    // No copy at all when the input already has the shape and dtype and is contiguous.
    broadcast.inputs.push_back(t.to(broadcast.dtype).expand(broadcast.shape).contiguous());
  }
  return broadcast;
}

// The incoming gradient of such an op's backward must look like the forward's output.
inline void check_like_output(const at::Tensor& grad_output, const Broadcast& broadcast,
                              const char* op) {
  TORCH_CHECK(grad_output.sizes() == c10::IntArrayRef(broadcast.shape), op,
              ": argument 'grad_output' must have the shape of the forward's output ",
              shape_string(broadcast.shape), ", but got ", shape_string(grad_output.sizes()));
  TORCH_CHECK(grad_output.scalar_type() == broadcast.dtype, op,
              ": argument 'grad_output' must have the dtype of the forward's output, ",
              broadcast.dtype, ", but got ", grad_output.scalar_type());
}

}  // namespace opgen
