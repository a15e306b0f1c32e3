// The activations the linear and mlp layouts fuse (opgen/linear_backward.cuh, opgen/mlp.cuh),
// written once, in float: each is a struct with
//   forward(z)             the activation of the pre-activation z;
//   derivative(v)          d act / dz, from v = z, or for ReLU from z or its output (either is
//                          positive exactly where ReLU passes);
//   backward(grad, v)      the chain rule, grad * derivative(v), except that ReLU selects rather
//                          than multiplies (a NaN or infinite gradient where ReLU does not pass
//                          gives 0, as ATen's threshold_backward does).
//   kNeverNan              forward(z) is never a NaN, whatever z (ReLU's fmaxf returns the
//                          other operand): the MLP rounds such outputs to tf32 without a NaN test.
// The formulas are ATen's (gelu, gelu_backward, silu), so a fused kernel rounds like eager
// PyTorch. The exponentials are expf, not __expf: expf stays within 2 ulp for any argument where
// __expf's error grows with |x| (tens of ulp at the tails of GELU's exp(-z^2/2) and SiLU's
// exp(-z)), and its few extra instructions are hidden by the memory or tensor-core time of the
// kernels that call it.
#pragma once

#include <cuda_runtime.h>

namespace opgen::activations {

struct Identity {
  static constexpr bool kNeverNan = false;
  __device__ __forceinline__ static float forward(float z) { return z; }
  __device__ __forceinline__ static float derivative(float) { return 1.0f; }
  __device__ __forceinline__ static float backward(float grad, float) { return grad; }
};

struct Relu {
  static constexpr bool kNeverNan = true;
  __device__ __forceinline__ static float forward(float z) { return fmaxf(z, 0.0f); }
  __device__ __forceinline__ static float derivative(float v) { return v > 0.0f ? 1.0f : 0.0f; }
  __device__ __forceinline__ static float backward(float grad, float v) {
    return v > 0.0f ? grad : 0.0f;
  }
};

// Exact GELU: z * Phi(z), Phi the standard normal CDF; d/dz = Phi(z) + z * phi(z).
struct Gelu {
  static constexpr bool kNeverNan = false;
  static constexpr float kSqrtHalf = 0.70710678118654752f;    // 1 / sqrt(2)
  static constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // 1 / sqrt(2 pi)
  __device__ __forceinline__ static float forward(float z) {
    return 0.5f * z * (1.0f + erff(z * kSqrtHalf));
  }
  __device__ __forceinline__ static float derivative(float z) {
    const float cdf = 0.5f * (1.0f + erff(z * kSqrtHalf));
    const float pdf = kInvSqrt2Pi * expf(-0.5f * z * z);
    return cdf + z * pdf;
  }
  __device__ __forceinline__ static float backward(float grad, float z) {
    return grad * derivative(z);
  }
};

// GELU's tanh form: z/2 (1 + tanh(u)), u = sqrt(2/pi) (z + 0.044715 z^3).
struct GeluTanh {
  static constexpr bool kNeverNan = false;
  static constexpr float kBeta = 0.79788456080286536f;  // sqrt(2 / pi)
  static constexpr float kKappa = 0.044715f;
  __device__ __forceinline__ static float forward(float z) {
    return 0.5f * z * (1.0f + tanhf(kBeta * (z + kKappa * z * z * z)));
  }
  __device__ __forceinline__ static float derivative(float z) {
    const float z_sq = z * z;
    const float t = tanhf(kBeta * (z + kKappa * z_sq * z));
    const float left = 0.5f * (1.0f + t);
    const float right = 0.5f * z * (1.0f - t * t) * kBeta * (1.0f + 3.0f * kKappa * z_sq);
    return left + right;
  }
  __device__ __forceinline__ static float backward(float grad, float z) {
    return grad * derivative(z);
  }
};

// SiLU: z * sigmoid(z); d/dz = s (1 + z (1 - s)), s = sigmoid(z).
struct Silu {
  static constexpr bool kNeverNan = false;
  __device__ __forceinline__ static float forward(float z) { return z / (1.0f + expf(-z)); }
  __device__ __forceinline__ static float derivative(float z) {
    const float s = 1.0f / (1.0f + expf(-z));
    return s * (1.0f + z * (1.0f - s));
  }
  __device__ __forceinline__ static float backward(float grad, float z) {
    return grad * derivative(z);
  }
};

}  // namespace opgen::activations
