// The hardware's approximate special functions, each written once: exp2_ftz (softmax's exp in
// every type), and cheap float math for kernels whose results are stored in float16 or bfloat16
// (the formula ops', gelu's). Their approximate exp (ex2.approx, a few ulp) and division cost a
// fraction of the correctly rounded versions, and their error is far below the 2^-9 / 2^-12
// rounding of a 16-bit result. They flush float denormals (below 2^-126) to zero, as their .ftz
// forms do: each saves the handful of instructions that keep denormals, which matter where the
// math, not memory, bounds a kernel (mish's 16-bit backward); a 16-bit result that small is zero
// in float16 and a subnormal in bfloat16, far inside any tolerance. On the host they are the std
// functions.
#pragma once

#include <c10/macros/Macros.h>

#include <cmath>

namespace opgen {

// True for the 16-bit storage types, whose math may use the approximations below.
template <typename scalar_t>
constexpr bool is_16bit_float() {
  return sizeof(scalar_t) == 2;
}

// 2^x with results below 2^-126 flushed to zero: for a float, the single MUFU.EX2 of
// ex2.approx.ftz (2 ulp). exp2f wraps the same instruction in three more that keep subnormal
// results; without them a softmax output under 1.2e-38 is 0 rather than subnormal, and on an
// H200 the softmax forward gained 3 to 5 points of copy bandwidth on rows of 32768 to 262144. A
// double takes exp2.
C10_HOST_DEVICE inline float exp2_ftz(float x) {
#ifdef __CUDA_ARCH__
  float result;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
#else
  return std::exp2(x);
#endif
}

C10_HOST_DEVICE inline double exp2_ftz(double x) {
  return std::exp2(x);
}

C10_HOST_DEVICE inline float fast_exp(float x) {
#ifdef __CUDA_ARCH__
  return exp2_ftz(x * 1.4426950408889634f);
#else
  return std::exp(x);
#endif
}

C10_HOST_DEVICE inline float fast_divide(float numerator, float denominator) {
#ifdef __CUDA_ARCH__
  float result;
  asm("div.approx.ftz.f32 %0, %1, %2;" : "=f"(result) : "f"(numerator), "f"(denominator));
  return result;
#else
  return numerator / denominator;
#endif
}

C10_HOST_DEVICE inline float fast_reciprocal(float x) {
#ifdef __CUDA_ARCH__
  float result;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
#else
  return 1.0f / x;
#endif
}

// ln(x): lg2.approx times ln 2; its absolute error (2^-21 near 1) is far below 16-bit rounding.
C10_HOST_DEVICE inline float fast_log(float x) {
#ifdef __CUDA_ARCH__
  return __logf(x);
#else
  return std::log(x);
#endif
}

// ln(1 + u). Near u = 0 the log of 1 + u would keep only its absolute accuracy, so small |u|
// take the series u - u^2/2 + u^3/3 (error below u^4/4, under 2^-26 relative there).
C10_HOST_DEVICE inline float fast_log1p(float u) {
  if (std::fabs(u) < 1.0f / 64) return u * (1.0f - u * (0.5f - u * (1.0f / 3)));
  return fast_log(1.0f + u);
}

// tanh(x): one MUFU.TANH on sm_75+, relative error under 2^-10.9: fine for bfloat16 (2^-9
// rounding) and within a rounding step of float16 (2^-12).
C10_HOST_DEVICE inline float fast_tanh(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  float result;
  asm("tanh.approx.f32 %0, %1;" : "=f"(result) : "f"(x));
  return result;
#else
  return std::tanh(x);
#endif
}

}  // namespace opgen
