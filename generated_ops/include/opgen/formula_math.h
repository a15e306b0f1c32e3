// The functions that the math of a formula op calls besides arithmetic and std functions, shared
// by every op that `opgen new NAME --formula EXPR` renders (opgen/formula prints the calls).
// Each takes kFast, true for 16-bit storage types: those use the hardware's approximations
// (opgen/fast_math.h), exact enough for them; the others the correctly rounded std functions.
#pragma once

#include <c10/macros/Macros.h>

#include <cmath>

#include "opgen/fast_math.h"

namespace opgen::formula {

// The hardware's approximate exp for 16-bit outputs (opgen/fast_math.h), std::exp otherwise.
template <bool kFast, typename T>
C10_HOST_DEVICE T exp(T value) {
  if constexpr (kFast) {
    return opgen::fast_exp(value);
  } else {
    return std::exp(value);
  }
}

// For 16-bit outputs, the hardware's approximations of log, log1p and tanh (opgen/fast_math.h);
// the correctly rounded std functions otherwise.
template <bool kFast, typename T>
C10_HOST_DEVICE T log(T value) {
  if constexpr (kFast) {
    return opgen::fast_log(value);
  } else {
    return std::log(value);
  }
}

template <bool kFast, typename T>
C10_HOST_DEVICE T log1p(T value) {
  if constexpr (kFast) {
    return opgen::fast_log1p(value);
  } else {
    return std::log1p(value);
  }
}

template <bool kFast, typename T>
C10_HOST_DEVICE T tanh(T value) {
  if constexpr (kFast) {
    return opgen::fast_tanh(value);
  } else {
    return std::tanh(value);
  }
}

// e = e^-m and 1 / (1 + e), for m >= 0, with the fast approximations: what sigmoid and
// sigmoid_grad (m = |v|), sech2 and tanh_beside_sech2 (m = 2|v|) of 16-bit outputs build on. Where
// a formula calls several of them on one argument (x * sigmoid(x) and its derivative; tanh and
// sech^2 in the derivative of anything with a tanh), the compiler computes these once.
template <typename T>
struct ExpOfMinus {
  T e;
  T reciprocal;  // 1 / (1 + e)
};

template <typename T>
C10_HOST_DEVICE ExpOfMinus<T> exp_of_minus(T magnitude) {
  const T e = opgen::fast_exp(-magnitude);
  return {e, opgen::fast_reciprocal(T(1) + e)};
}

// 1 / (1 + e^-v): saturates to 0 or 1 without NaN, as torch.sigmoid. 16-bit outputs take it from
// exp_of_minus(|v|) (softplus(v) shares its e). Other types keep the literal form, one rounding
// fewer for negative v (fuzz132's float32 tests, expm1(4 sigmoid(x^3)) + y, failed without it).
template <bool kFast, typename T>
C10_HOST_DEVICE T sigmoid(T value) {
  if constexpr (kFast) {
    const auto [e, reciprocal] = exp_of_minus(std::abs(value));
    return value >= T(0) ? reciprocal
                         : e * reciprocal;  // NaN fails the test: e * reciprocal is NaN
  } else {
    return T(1) / (T(1) + exp<kFast>(-value));
  }
}

// Integer powers as multiplications: std::pow(float, int) would compute in double.
template <int kPower, typename T>
C10_HOST_DEVICE T ipow(T base) {
  static_assert(kPower >= 1, "ipow takes a positive power");
  T result = base;
#pragma unroll
  for (int i = 1; i < kPower; ++i) result *= base;
  return result;
}

// The derivatives of sigmoid and tanh. In float, sigmoid(v) (1 - sigmoid(v)) and 1 - tanh(v)^2
// lose their digits to cancellation once |v| passes 4 or so (with the hardware's approximate tanh,
// whose error is 2^-11 of 1, already near 3); from e = e^-|v| they keep them all and never
// overflow. 16-bit outputs need that too: the derivative is often scaled up by the rest of the
// formula (fuzz126: 9 expm1(3 tanh x)^2 e^(3 tanh x) sech^2 x, 0 instead of 0.02 at x = 8).
template <bool kFast, typename T>
C10_HOST_DEVICE T sigmoid_grad(T value) {
  if constexpr (kFast) {
    const auto [e, reciprocal] = exp_of_minus(std::abs(value));
    return e * reciprocal * reciprocal;
  } else {
    const T e = exp<kFast>(-std::abs(value));
    const T denominator = T(1) + e;
    return e / (denominator * denominator);
  }
}

template <bool kFast, typename T>
C10_HOST_DEVICE T sech2(T value) {
  if constexpr (kFast) {
    const auto [e, reciprocal] = exp_of_minus(T(2) * std::abs(value));
    return T(4) * e * reciprocal * reciprocal;
  } else {
    const T e = exp<kFast>(T(-2) * std::abs(value));
    const T denominator = T(1) + e;
    return T(4) * e / (denominator * denominator);
  }
}

// tanh(v) where the same function also computes sech2(v), as the derivative of anything with a
// tanh does (opgen/formula prints it there). 16-bit outputs take it from sech2's
// exp_of_minus(2|v|), which the compiler then computes once: the separate approximate tanh would
// be a third special-function instruction, and those, not memory, bound a backward like mish's on
// the GPU. Other types: std::tanh.
template <bool kFast, typename T>
C10_HOST_DEVICE T tanh_beside_sech2(T value) {
  if constexpr (kFast) {
    const T magnitude = std::abs(value);
    const auto [e, reciprocal] = exp_of_minus(T(2) * magnitude);
    // Below 2^-8, 1 - e keeps too few digits (ex2.approx's error is 2^-22 of 1), and v itself
    // is tanh(v) to 2^-17.
    return magnitude < T(1.0 / 256) ? value : std::copysign((T(1) - e) * reciprocal, value);
  } else {
    return std::tanh(value);
  }
}

// log(1 + e^v) as max(v, 0) + log1p(e^-|v|), as torch.nn.functional.softplus: the literal form
// overflows to inf for v past 88 in float (709 in double), this one never does; NaN propagates.
template <bool kFast, typename T>
C10_HOST_DEVICE T softplus(T value) {
  return (value > T(0) ? value : T(0)) + log1p<kFast>(exp<kFast>(-std::abs(value)));
}

// log(sigmoid(v)) as min(v, 0) - log1p(e^-|v|), as torch.nn.functional.logsigmoid: the literal
// form rounds sigmoid to 0 and gives -inf for v below -88 in float (-745 in double).
template <bool kFast, typename T>
C10_HOST_DEVICE T log_sigmoid(T value) {
  return (value < T(0) ? value : T(0)) - log1p<kFast>(exp<kFast>(-std::abs(value)));
}

// log(e^a + e^b) as max(a, b) + log1p(e^-|a - b|), as torch.logaddexp: the literal form overflows
// once either exponent passes 88 in float (709 in double). Equal infinities give themselves (the
// difference would be NaN); NaN propagates.
template <bool kFast, typename T>
C10_HOST_DEVICE T logaddexp(T a, T b) {
  if (a != a || b != b) return a + b;
  if (a == b && (a - a) != T(0)) return a;  // both +inf or both -inf
  const T larger = a > b ? a : b;
  return larger + log1p<kFast>(exp<kFast>(-std::abs(a - b)));
}

// torch.sign: 0 at 0, which is also torch.abs's gradient there.
template <typename T>
C10_HOST_DEVICE T sign(T value) {
  return value > T(0) ? T(1) : (value < T(0) ? T(-1) : T(0));
}

// torch.maximum / torch.minimum: NaN from either side propagates.
template <typename T>
C10_HOST_DEVICE T maximum(T a, T b) {
  return (b < a || a != a) ? a : b;
}

template <typename T>
C10_HOST_DEVICE T minimum(T a, T b) {
  return (b > a || a != a) ? a : b;
}

// A formula op's Functors (opgen/elementwise_op.h): its forward and backward functor templates,
// kFast for 16-bit storage types, with the op's params as their members in order.
template <template <bool> class Forward, template <bool> class Backward>
struct Functors {
  template <typename scalar_t, typename Run, typename... Params>
  static void forward(Run&& run, const Params&... params) {
    run(Forward<is_16bit_float<scalar_t>()>{params...});
  }

  template <typename scalar_t, typename Run, typename... Params>
  static void backward(Run&& run, const Params&... params) {
    run(Backward<is_16bit_float<scalar_t>()>{params...});
  }
};

}  // namespace opgen::formula
