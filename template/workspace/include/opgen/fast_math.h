// Cheap float math for kernels whose results are stored in float16 or bfloat16. The hardware's
// approximate exp (ex2.approx, a few ulp) and division cost a fraction of the correctly rounded
// versions, and their error is far below the 2^-9 / 2^-12 rounding of the 16-bit result. On the
// host they are the std functions.
#pragma once

#include <c10/macros/Macros.h>

#include <cmath>

namespace opgen {

// True for the 16-bit storage types, whose math may use the approximations below.
template <typename scalar_t>
constexpr bool is_16bit_float() {
  return sizeof(scalar_t) == 2;
}

C10_HOST_DEVICE inline float fast_exp(float x) {
#ifdef __CUDA_ARCH__
  return __expf(x);
#else
  return std::exp(x);
#endif
}

C10_HOST_DEVICE inline float fast_divide(float numerator, float denominator) {
#ifdef __CUDA_ARCH__
  return __fdividef(numerator, denominator);
#else
  return numerator / denominator;
#endif
}

}  // namespace opgen
