// How a reduction along one dimension sees a tensor: `outer` slabs of dim_size x inner, so that
// element (o, d, i) sits at (o * dim_size + d) * inner + i. inner == 1 means rows.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace opgen {

struct Slabs {
  int64_t outer = 1;
  int64_t dim_size = 1;
  int64_t inner = 1;
};

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
