// The values of a functor with several outputs, such as the backward of an op with several
// tensor inputs (one gradient per input). The elementwise loops store values[k] to output k.
#pragma once

namespace opgen {

template <typename T, int N>
struct Results {
  static_assert(N >= 1, "Results holds at least one value");
  T values[N];
};

}  // namespace opgen
