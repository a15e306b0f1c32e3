// How a reduction along one dimension sees a tensor: `outer` slabs of dim_size x inner, so that
// element (o, d, i) sits at (o * dim_size + d) * inner + i. inner == 1 means rows.
//
// No torch headers here: kernel files include this, and every header they include is parsed
// twice by nvcc (host and device passes).
#pragma once

#include <cstdint>

namespace opgen {

struct Slabs {
  int64_t outer = 1;
  int64_t dim_size = 1;
  int64_t inner = 1;
};

}  // namespace opgen
