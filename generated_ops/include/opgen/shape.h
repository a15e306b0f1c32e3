// The Slabs of a tensor reduced along one dimension.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "opgen/slabs.h"

namespace opgen {

// `dim` must already be wrapped (opgen::wrap_dim).
inline Slabs slabs_of(const at::Tensor& x, int64_t dim) {
  Slabs slabs;
  if (x.dim() == 0) return slabs;  // a scalar is one row of one value
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t size = x.size(d);
    if (d < dim) slabs.outer *= size;
    if (d == dim) slabs.dim_size = size;
    if (d > dim) slabs.inner *= size;
  }
  return slabs;
}

}  // namespace opgen
