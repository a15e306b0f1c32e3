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
// the bias gradient sums g over the GEMM's k = M, which is cuBLASLt's BGRADB epilogue. The input
// gradient is ATen's GEMM (the same kernel eager PyTorch runs).
#pragma once

#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/gelu.h>
#include <ATen/cuda/CUDAContextLight.h>
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

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
inline bool aligned(const void* pointer) {
  return reinterpret_cast<uintptr_t>(pointer) % 16 == 0;
}

inline bool fits(const Gemm& g, int64_t element_bytes) {
  for (const void* pointer :
       {g.a, g.b, static_cast<const void*>(g.d), g.bias, static_cast<const void*>(g.aux)}) {
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
inline bool set(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                const T& value) {
  return cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)) ==
         CUBLAS_STATUS_SUCCESS;
}

// The largest power of two, up to 256, that divides every address: what cuBLASLt may assume
// (its default, 256, would let it pick kernels that fault on a 16-byte-aligned view).
inline uint32_t common_alignment(std::initializer_list<const void*> pointers) {
  uint32_t alignment = 256;
  for (const void* pointer : pointers) {
    while (alignment > 16 && reinterpret_cast<uintptr_t>(pointer) % alignment != 0) alignment /= 2;
  }
  return alignment;
}

// What cuBLASLt decides for one problem (descriptors and the algorithm), made once per problem
// and thread: the heuristic costs microseconds, as long as a small layer's whole GEMM.
struct Plan {
  Owned<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy> desc;
  Owned<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy> a, b, d;
  cublasLtMatmulAlgo_t algo = {};
  bool usable = false;  // false: cuBLASLt has no kernel for it (the caller takes ATen's path)
  std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's best few, until timed
};

// The heuristic's best few algorithms are timed once (CUDA events on the op's stream, after one
// warm-up run each) and the fastest kept: its first choice is often not the fastest with an
// epilogue. Every candidate writes the same outputs, so the tuning runs leave them right.
constexpr int kCandidates = 4;

// How run() looks for a problem's algorithm: the heuristic's best `candidates`, timed once, with
// the caller's workspace where it gives one (split-K algorithms keep their partial products
// there, so a larger one lets the heuristic offer them), else torch's cuBLASLt workspace.
struct Search {
  int candidates = kCandidates;
  void* workspace = nullptr;  // 256-byte aligned; nullptr: torch's
  uint64_t workspace_bytes = 0;
};

// Whether choices are made by timing: not under torch.use_deterministic_algorithms(True), where
// two processes must compute alike (timings differ between them, and so would their choices and
// the bits of their results), as PyTorch turns cuDNN's benchmark off there. Nor inside CUDA graph
// capture, where nothing may wait on the GPU.
inline bool choose_by_timing(cudaStream_t stream) {
  if (at::globalContext().deterministicAlgorithms()) return false;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  return capture == cudaStreamCaptureStatusNone;
}

inline std::unique_ptr<Plan> make_plan(const Gemm& g, cudaDataType_t type,
                                       cublasComputeType_t compute, uint32_t alignment,
                                       uint64_t workspace_bytes, int candidates) {
  auto plan = std::make_unique<Plan>();
  if (cublasLtMatmulDescCreate(&plan->desc.handle, compute, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
    return plan;
  cublasLtMatmulDesc_t desc = plan->desc.handle;
  bool ok = set(desc, CUBLASLT_MATMUL_DESC_TRANSA, g.transa) &&
            set(desc, CUBLASLT_MATMUL_DESC_TRANSB, g.transb) &&
            set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, g.epilogue);
  // The heuristic needs the bias and aux pointers set; each call sets its own.
  if (g.bias != nullptr) ok = ok && set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias);
  if (g.aux != nullptr) {
    ok = ok && set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux) &&
         set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, g.ldd);
  }
  // The matrices as stored (column-major): op(A) is m x k, so A is k x m when transposed.
  const bool ta = g.transa != CUBLAS_OP_N, tb = g.transb != CUBLAS_OP_N;
  ok = ok &&
       cublasLtMatrixLayoutCreate(&plan->a.handle, type, ta ? g.k : g.m, ta ? g.m : g.k, g.lda) ==
           CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutCreate(&plan->b.handle, type, tb ? g.n : g.k, tb ? g.k : g.n, g.ldb) ==
           CUBLAS_STATUS_SUCCESS &&
       cublasLtMatrixLayoutCreate(&plan->d.handle, type, g.m, g.n, g.ldd) == CUBLAS_STATUS_SUCCESS;
  Owned<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy> preference;
  ok = ok && cublasLtMatmulPreferenceCreate(&preference.handle) == CUBLAS_STATUS_SUCCESS;
  const auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attribute, const auto& value) {
    return cublasLtMatmulPreferenceSetAttribute(preference.handle, attribute, &value,
                                                sizeof(value)) == CUBLAS_STATUS_SUCCESS;
  };
  ok = ok && prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, workspace_bytes);
  for (auto attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    ok = ok && prefer(attribute, alignment);
  }
  if (!ok) return plan;
  std::vector<cublasLtMatmulHeuristicResult_t> heuristics(std::max(candidates, 1));
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(at::cuda::getCurrentCUDABlasLtHandle(), desc, plan->a.handle,
                                     plan->b.handle, plan->d.handle, plan->d.handle,
                                     preference.handle, static_cast<int>(heuristics.size()),
                                     heuristics.data(), &found) == CUBLAS_STATUS_SUCCESS &&
      found > 0) {
    plan->algo = heuristics[0].algo;
    plan->usable = true;
    for (int i = 0; i < found; ++i) {
      if (heuristics[i].state == CUBLAS_STATUS_SUCCESS)
        plan->candidates.push_back(heuristics[i].algo);
    }
  }
  return plan;
}

inline cublasStatus_t matmul(const Plan& plan, const cublasLtMatmulAlgo_t& algo, const Gemm& g,
                             void* workspace, uint64_t workspace_bytes, cudaStream_t stream) {
  const float one = 1.0f, zero = 0.0f;
  return cublasLtMatmul(at::cuda::getCurrentCUDABlasLtHandle(), plan.desc.handle, &one, g.a,
                        plan.a.handle, g.b, plan.b.handle, &zero, g.d, plan.d.handle, g.d,
                        plan.d.handle, &algo, workspace, workspace_bytes, stream);
}

// Times the plan's candidates on `g` (whose outputs they all write alike) and keeps the fastest.
inline void tune(Plan& plan, const Gemm& g, void* workspace, uint64_t workspace_bytes,
                 cudaStream_t stream) {
  std::vector<cublasLtMatmulAlgo_t> runnable;
  for (const auto& algo : plan.candidates) {
    if (matmul(plan, algo, g, workspace, workspace_bytes, stream) == CUBLAS_STATUS_SUCCESS)
      runnable.push_back(algo);
  }
  plan.candidates.clear();
  if (runnable.size() < 2) {  // one choice, or none (then the caller takes ATen's path)
    plan.usable = !runnable.empty();
    if (plan.usable) plan.algo = runnable[0];
    return;
  }
  std::vector<cudaEvent_t> marks(runnable.size() + 1);
  for (cudaEvent_t& mark : marks) C10_CUDA_CHECK(cudaEventCreate(&mark));
  C10_CUDA_CHECK(cudaEventRecord(marks[0], stream));
  for (size_t i = 0; i < runnable.size(); ++i) {
    matmul(plan, runnable[i], g, workspace, workspace_bytes, stream);
    C10_CUDA_CHECK(cudaEventRecord(marks[i + 1], stream));
  }
  C10_CUDA_CHECK(cudaEventSynchronize(marks.back()));
  float best = 0;
  for (size_t i = 0; i < runnable.size(); ++i) {
    float ms = 0;
    C10_CUDA_CHECK(cudaEventElapsedTime(&ms, marks[i], marks[i + 1]));
    if (i == 0 || ms < best) {
      best = ms;
      plan.algo = runnable[i];
    }
  }
  for (cudaEvent_t mark : marks) C10_CUDA_CHECK(cudaEventDestroy(mark));
}

// Runs `g` on torch's cuBLASLt handle, its workspace (or the search's) and `stream`; false where
// cuBLASLt has no kernel for it (nothing is then written that a fallback would not overwrite).
inline bool run(const Gemm& g, at::ScalarType dtype, cudaStream_t stream,
                const Search& search = {}) {
  cudaDataType_t type;
  if (!data_type(dtype, type) || !fits(g, static_cast<int64_t>(c10::elementSize(dtype))))
    return false;
  const cublasComputeType_t compute = compute_type(dtype);
  const uint32_t alignment = common_alignment({g.a, g.b, g.d});
  const bool own = search.workspace != nullptr;
  void* workspace = own ? search.workspace : at::cuda::getCUDABlasLtWorkspace();
  const uint64_t workspace_bytes =
      own ? search.workspace_bytes : at::cuda::getCUDABlasLtWorkspaceSize();
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  const bool timed = choose_by_timing(stream);
  // Everything the plan depends on (the pointers only through their alignment).
  const std::array<int64_t, 18> key = {g.transa,
                                       g.transb,
                                       g.m,
                                       g.n,
                                       g.k,
                                       g.lda,
                                       g.ldb,
                                       g.ldd,
                                       g.epilogue,
                                       g.bias != nullptr,
                                       g.aux != nullptr,
                                       type,
                                       compute,
                                       alignment,
                                       static_cast<int64_t>(workspace_bytes),
                                       device,
                                       search.candidates,
                                       timed};
  thread_local std::map<std::array<int64_t, 18>, std::unique_ptr<Plan>>
      plans;  // descriptors are per thread
  auto found = plans.find(key);
  if (found == plans.end()) {
    std::unique_ptr<Plan> plan =
        make_plan(g, type, compute, alignment, workspace_bytes, search.candidates);
    // Untimed, the heuristic's first choice: the same in every process.
    if (plan->usable && timed) tune(*plan, g, workspace, workspace_bytes, stream);
    found = plans.emplace(key, std::move(plan)).first;
  }
  const Plan& plan = *found->second;
  if (!plan.usable) return false;
  if ((g.bias != nullptr && !set(plan.desc.handle, CUBLASLT_MATMUL_DESC_BIAS_POINTER, g.bias)) ||
      (g.aux != nullptr &&
       !set(plan.desc.handle, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, g.aux))) {
    return false;
  }
  return matmul(plan, plan.algo, g, workspace, workspace_bytes, stream) == CUBLAS_STATUS_SUCCESS;
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

// dW (N x K) = g^T (N x M) @ X (M x K): dW^T (K x N) = X^T (K x M) times g (M x N, read
// transposed); with `grad_bias`, the bias gradient (g summed over M) from the same GEMM (BGRADB).
// X's rows may be strided (a view of some columns of a wider tensor): its elements contiguous,
// its leading dimension its row stride; grad_pre and grad_weight contiguous.
inline bool weight_gradient(const at::Tensor& grad_pre, const at::Tensor& rows,
                            at::Tensor& grad_weight, at::Tensor* grad_bias, cudaStream_t stream,
                            const Search& search = {}) {
  if (rows.size(1) > 1 && rows.stride(1) != 1) return false;
  Gemm g;
  g.transb = CUBLAS_OP_T;
  g.m = rows.size(1);
  g.n = grad_pre.size(1);
  g.k = rows.size(0);
  g.a = rows.const_data_ptr();
  g.lda = rows.size(0) > 1 ? rows.stride(0) : g.m;
  g.b = grad_pre.const_data_ptr();
  g.ldb = g.n;
  g.d = grad_weight.mutable_data_ptr();
  g.ldd = g.m;
  if (grad_bias != nullptr) {
    g.epilogue = CUBLASLT_EPILOGUE_BGRADB;
    g.bias = grad_bias->mutable_data_ptr();
  }
  return run(g, rows.scalar_type(), stream, search);
}

// What one call of `f` costs in a loop of such calls on `stream`, in seconds by the host's clock,
// from an idle stream to the last call's end, the best of two rounds: the GPU's time where it is
// the longer, the host's where issuing the call is (a small problem's GEMM, whose host path,
// dispatcher and checks included, can take longer than its kernel).
template <typename F>
double seconds_per_call(F&& f, cudaStream_t stream) {
  constexpr int kCalls = 4;
  double best = 0;
  for (int round = 0; round < 2; ++round) {
    C10_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto began = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) f();
    C10_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count() / kCalls;
    if (round == 0 || seconds < best) best = seconds;
  }
  return best;
}

// The weight gradient, with the bias gradient where `grad_bias` is given: cuBLASLt's GEMM above
// (its algorithm timed once per problem; the bias gradient from its BGRADB epilogue) or ATen's
// GEMM (and then its sum over rows), whichever cost less a call the first time this problem came
// (seconds_per_call, once per problem and device, both on `stream`): the faster kernel where the
// GPU bounds a call, the cheaper host path where the host does, as in a small batch's training
// step. Both write the same tensors, the chosen one last, so the timing runs leave them as later
// calls write them, bit for bit; later calls take the choice. cuBLASLt's bias-gradient epilogue
// is not equally fast for every shape, and ATen's path is exactly eager PyTorch's, so this is
// never slower than eager. Where choices are not timed (choose_by_timing), ATen's: the same bits
// in every process.
inline void weight_and_bias_gradients(const at::Tensor& grad_pre, const at::Tensor& rows,
                                      at::Tensor& grad_weight, at::Tensor* grad_bias,
                                      cudaStream_t stream, const Search& search = {}) {
  const auto fused = [&] {
    return weight_gradient(grad_pre, rows, grad_weight, grad_bias, stream, search);
  };
  const auto unfused = [&] {
    at::mm_out(grad_weight, grad_pre.t(), rows);
    if (grad_bias != nullptr) at::sum_out(*grad_bias, grad_pre, {0});
  };
  if (at::globalContext().deterministicAlgorithms()) {  // not a choice timed earlier either
    unfused();
    return;
  }
  static std::mutex mutex;
  static std::map<std::array<int64_t, 9>, bool> fused_is_faster;
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  const std::array<int64_t, 9> key = {grad_pre.size(0),
                                      grad_pre.size(1),
                                      rows.size(1),
                                      rows.size(0) > 1 ? rows.stride(0) : rows.size(1),
                                      static_cast<int64_t>(grad_pre.scalar_type()),
                                      device,
                                      grad_bias != nullptr,
                                      search.candidates,
                                      static_cast<int64_t>(search.workspace_bytes)};
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto known = fused_is_faster.find(key);
    if (known != fused_is_faster.end()) {
      if (!known->second || !fused()) unfused();
      return;
    }
  }
  if (!choose_by_timing(stream)) {  // CUDA graph capture
    unfused();
    return;
  }
  bool choice = false;
  if (fused()) {  // each ran once (warm-up), then timed
    unfused();
    choice = seconds_per_call(fused, stream) <= seconds_per_call(unfused, stream);
    // The outputs as later calls will write them: both paths give the same values but not the
    // same bits (they add in different orders), and a result must not depend on being the first.
    if (choice) fused();
  } else {
    unfused();
  }
  const std::lock_guard<std::mutex> lock(mutex);
  fused_is_faster.emplace(key, choice);
}

}  // namespace opgen::linear::lt
