// The fused CUDA path of the linear layout: cuBLASLt GEMMs whose epilogues add the bias and apply
// the activation (forward), and fold the bias gradient into the weight-gradient GEMM (backward).
// Host code only (the C++ compiler builds it, not nvcc), on torch's cuBLASLt handle, workspace
// and current stream. Every function returns false when cuBLASLt refuses the problem (a type,
// shape, alignment or epilogue it has no kernel for): the caller then takes the unfused ATen
// path of opgen/linear.h, so the op never fails where ATen would succeed.
//
// Row-major tensors are column-major matrices transposed, so y = x @ W^T (x: M x K, W: N x K,
// y: M x N, all row-major) is, column-major, y^T (N x M) = W^T (N x K, W read transposed) times
// x^T (K x M): the bias then runs along the GEMM's rows (m = N), as cuBLASLt's bias epilogues
// expect. The weight gradient dW^T (K x N) = x^T (K x M) times g (M x N, g read transposed):
// the bias gradient sums g over the GEMM's k = M, which is cuBLASLt's BGRADB epilogue.
#pragma once

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/gelu.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>

#include "opgen/linear.h"

namespace opgen::linear::lt {

// One GEMM: D (m x n, column-major, leading dimension ldd) = op(A) (m x k) times op(B) (k x n).
struct Gemm {
  cublasOperation_t transa = CUBLAS_OP_N;
  cublasOperation_t transb = CUBLAS_OP_N;
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t lda = 0;
  const void* b = nullptr;
  int64_t ldb = 0;
  void* d = nullptr;
  int64_t ldd = 0;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void* bias = nullptr;  // the bias (BIAS epilogues) or the bias gradient written (BGRAD)
  void* aux = nullptr;         // the pre-activation written by the *_AUX epilogues (ld = ldd)
};

// cuBLASLt's data type for a torch dtype; false for those this path leaves to ATen (float64).
inline bool data_type(at::ScalarType dtype, cudaDataType_t& type) {
  switch (dtype) {
    case at::kHalf:
      type = CUDA_R_16F;
      return true;
    case at::kBFloat16:
      type = CUDA_R_16BF;
      return true;
    case at::kFloat:
      type = CUDA_R_32F;
      return true;
    default:
      return false;
  }
}

// float16 and bfloat16 accumulate in float32 on tensor cores; float32 runs on TF32 tensor cores
// only where torch.backends.cuda.matmul.allow_tf32 says so, as torch's own matmuls do.
inline cublasComputeType_t compute_type(at::ScalarType dtype) {
  if (dtype == at::kFloat && !at::globalContext().allowTF32CuBLAS()) return CUBLAS_COMPUTE_32F;
  return dtype == at::kFloat ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

// The kernels cuBLASLt picks for tensor cores read 16 bytes at a time: every pointer on a
// 16-byte boundary and every leading dimension a whole number of 16 bytes, else ATen's path.
inline bool aligned(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

inline bool fits(const Gemm& g, int64_t element_bytes) {
  for (const void* pointer : {g.a, g.b, static_cast<const void*>(g.d), g.bias, static_cast<const void*>(g.aux)}) {
    if (pointer != nullptr && !aligned(pointer)) return false;
  }
  for (int64_t ld : {g.lda, g.ldb, g.ldd}) {
    if (ld * element_bytes % 16 != 0) return false;
  }
  return g.m > 0 && g.n > 0 && g.k > 0;
}

template <typename T, cublasStatus_t (*destroy)(T)>
struct Owned {  // a cuBLASLt descriptor, destroyed with its owner
  T handle = nullptr;
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (handle != nullptr) destroy(handle);
  }
};

template <typename T>
inline bool set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  return cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)) == CUBLAS_STATUS_SUCCESS;
}

// Runs `g` on torch's cuBLASLt handle, workspace and `stream`; false where cuBLASLt has no kernel
// for it (nothing is then written that a fallback would not overwrite).
inline bool run(const Gemm& g, at::ScalarType dtype, cudaStream_t stream) {
  cudaDataType_t type;
  if (!data_type(dtype, type) || !fits(g, static_cast<int64_t>(c10::elementSize(dtype)))) return false;
  Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> desc;
  if (cublasLtMatmulDescCreate(&desc.handle, compute_type(dtype), CUDA_R_32F) != CUBLAS_STATUS_SUCCESS) return false;
  bool ok = set(desc.handle, CUBLASLT_MATMUL_DESC_TRANSA, g.transa) &&
            set(desc.handle, CUBLASLT_MATMUL_DESC_TRANSB, g.transb) &&
            set(desc.handle, CUBLASLT_MATMUL_DESC_EPILOGUE, g.epilogue);
  if (g.bias != nullptr) ok = ok && set(desc.handle, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.aux != nullptr) {
    ok = ok && set(desc.handle, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux) &&
         set(desc.handle, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.ldd);
  }
  // The matrices as stored (column-major): op(A) is m x k, so A is k x m when transposed.
  const bool ta = g.transa != CUBLAS_OP_N, tb = g.transb != CUBLAS_OP_N;
  Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> a, b, d;
  ok = ok &&
       cublasLtMatrixLayoutCreate(&a.handle, type, ta ? g.k : g.m, ta ? g.m : g.k, g.lda) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutCreate(&b.handle, type, tb ? g.n : g.k, tb ? g.k : g.n, g.ldb) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutCreate(&d.handle, type, g.m, g.n, g.ldd) == CUBLAS_STATUS_SUCCESS;
  Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> preference;
  void* workspace = at::cuda::getCUDABlasLtWorkspace();
  uint64_t workspace_bytes = at::cuda::getCUDABlasLtWorkspaceSize();
  ok = ok && cublasLtMatmulPreferenceCreate(&preference.handle) == CUBLAS_STATUS_SUCCESS &&
       cublasLtMatmulPreferenceSetAttribute(preference.handle, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                            &workspace_bytes, sizeof(workspace_bytes)) == CUBLAS_STATUS_SUCCESS;
  if (!ok) return false;
  cublasLtHandle_t handle = at::cuda::getCurrentCUDABlasLtHandle();
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(handle, desc.handle, a.handle, b.handle, d.handle, d.handle, preference.handle,
                                     1, &heuristic, &found) != CUBLAS_STATUS_SUCCESS ||
      found == 0) {
    return false;
  }
  const float one = 1.0f, zero = 0.0f;
  return cublasLtMatmul(handle, desc.handle, &one, g.a, a.handle, g.b, b.handle, &zero, g.d, d.handle, g.d, d.handle,
                        &heuristic.algo, workspace, workspace_bytes, stream) == CUBLAS_STATUS_SUCCESS;
}

// The forward on the GPU: `out2` (M x N) = act(rows @ weight^T + bias), keeping the pre-activation
// in `pre2` where it is defined. GELU (tanh) and ReLU run in the epilogue, the pre-activation kept
// as its auxiliary output; exact GELU (which cuBLASLt's epilogue does not compute: its GELU is
// the tanh form) and formula activations get the biased GEMM here and the activation after it.
// false: not run (the caller takes the ATen path).
inline bool forward(Activation activation, const at::Tensor& rows, const at::Tensor& weight,
                    const std::optional<at::Tensor>& bias, at::Tensor& out2, const at::Tensor& pre2,
                    cudaStream_t stream) {
  const bool with_bias = bias.has_value();
  Gemm g;
  g.transa = CUBLAS_OP_T;  // W (N x K row-major) is K x N column-major: transposed, op(A) is N x K
  g.m = weight.size(0);
  g.n = rows.size(0);
  g.k = rows.size(1);
  g.a = weight.const_data_ptr();
  g.lda = g.k;
  g.b = rows.const_data_ptr();
  g.ldb = g.k;
  g.ldd = g.m;
  g.bias = with_bias ? bias->const_data_ptr() : nullptr;
  switch (activation) {
    case Activation::kRelu:
      g.d = out2.mutable_data_ptr();
      g.epilogue = with_bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
      return run(g, rows.scalar_type(), stream);
    case Activation::kGeluTanh:
      g.d = out2.mutable_data_ptr();
      if (pre2.defined()) {
        g.aux = pre2.mutable_data_ptr();
        g.epilogue = with_bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
      } else {
        g.epilogue = with_bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
      }
      return run(g, rows.scalar_type(), stream);
    case Activation::kNone:
      g.d = out2.mutable_data_ptr();
      g.epilogue = with_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      return run(g, rows.scalar_type(), stream);
    default: {  // exact GELU, formula: the biased GEMM into the pre-activation, then the activation
      at::Tensor pre = pre2.defined() ? pre2 : out2;
      g.d = pre.mutable_data_ptr();
      g.epilogue = with_bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
      if (!run(g, rows.scalar_type(), stream)) return false;
      if (activation == Activation::kGelu) at::gelu_out(out2, pre, "none");
      return true;
    }
  }
}

// dX (M x K) = g (M x N) @ W (N x K): dX^T (K x M) = W^T (K x N) times g^T (N x M).
inline bool input_gradient(const at::Tensor& grad_pre, const at::Tensor& weight, at::Tensor& grad_rows,
                           cudaStream_t stream) {
  Gemm g;
  g.m = weight.size(1);
  g.n = grad_pre.size(0);
  g.k = weight.size(0);
  g.a = weight.const_data_ptr();
  g.lda = g.m;
  g.b = grad_pre.const_data_ptr();
  g.ldb = g.k;
  g.d = grad_rows.mutable_data_ptr();
  g.ldd = g.m;
  return run(g, weight.scalar_type(), stream);
}

// dW (N x K) = g^T (N x M) @ X (M x K): dW^T (K x N) = X^T (K x M) times g (M x N, read
// transposed); with `grad_bias`, the bias gradient (g summed over M) from the same GEMM (BGRADB).
inline bool weight_gradient(const at::Tensor& grad_pre, const at::Tensor& rows, at::Tensor& grad_weight,
                            at::Tensor* grad_bias, cudaStream_t stream) {
  Gemm g;
  g.transb = CUBLAS_OP_T;
  g.m = rows.size(1);
  g.n = grad_pre.size(1);
  g.k = rows.size(0);
  g.a = rows.const_data_ptr();
  g.lda = g.m;
  g.b = grad_pre.const_data_ptr();
  g.ldb = g.n;
  g.d = grad_weight.mutable_data_ptr();
  g.ldd = g.m;
  if (grad_bias != nullptr) {
    g.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    g.bias = grad_bias->mutable_data_ptr();
  }
  return run(g, rows.scalar_type(), stream);
}

}  // namespace opgen::linear::lt
