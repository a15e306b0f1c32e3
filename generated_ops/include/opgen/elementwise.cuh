// One vectorized CUDA kernel for every elementwise op: out[i] = fn(in_0[i], ..., in_k[i]).
// An op supplies only `fn`, a functor over its math type (float for half/bfloat16, so the math
// accumulates in fp32); loads, stores, the scalar tail and the grid live here once. A functor
// that returns opgen::Results<math_t, N> writes N outputs in the same pass (a backward giving
// the gradient of each of several inputs). The kernels see buffers, not tensors
// (opgen/elementwise_buffers.h): the checks, broadcasting and allocation are the host code's
// (opgen/elementwise_cuda.h), compiled by the C++ compiler.
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "opgen/elementwise_buffers.h"
#include "opgen/launch.cuh"
#include "opgen/results.h"
#include "opgen/vec.cuh"

namespace opgen {

// 128 threads of 2 packs (8 floats, 16 bfloat16s a thread), as PyTorch's own vectorized kernels
// on sm_90. Measured on an H200, erf-based gelu, float32 forward, % of a device copy at 16 MiB,
// 256 MiB and 1 GiB: 93/96/96 with 256 threads of 4 packs (eager: 102/99/100), 95/96/97 with
// 128 of 4, 96/96/97 with 256 of 2, 99/99/100 with 128 of 2.
constexpr int kElementwiseThreads = 128;

// Packs each thread handles, all loaded before any is used, so the loads and the math of
// independent packs overlap. Costly math needs more than one; cheap math is fastest with one,
// which puts the most blocks in flight (H200, relu at 256 MiB of float32: 100.6% of a copy with
// 1 pack, 96.3 with 4). A functor opts out of the default with
// `static constexpr int kPacksPerThread = 1;`.
constexpr int kDefaultPacksPerThread = 2;

template <typename Fn, typename = void>
struct PacksPerThread {
  static constexpr int value = kDefaultPacksPerThread;
};

template <typename Fn>
struct PacksPerThread<Fn, std::void_t<decltype(Fn::kPacksPerThread)>> {
  static constexpr int value = Fn::kPacksPerThread;
  static_assert(value >= 1 && value <= 16, "kPacksPerThread must be between 1 and 16");
};

template <typename Fn, typename T, int kVec, int kArity, std::size_t... I>
__device__ __forceinline__ auto apply_at(const Fn& fn, const Pack<T, kVec> (&packs)[kArity], int j,
                                         std::index_sequence<I...>) {
  using math_t = at::opmath_type<T>;
  return fn(static_cast<math_t>(packs[I].elem[j])...);
}

// Element j of the result packs: one output, or one per value of opgen::Results.
template <typename T, int kVec, typename Value>
__device__ __forceinline__ void put(Pack<T, kVec> (&result)[1], int j, const Value& value) {
  result[0].elem[j] = static_cast<T>(value);
}

template <typename T, int kVec, typename Value, int kOutputs>
__device__ __forceinline__ void put(Pack<T, kVec> (&result)[kOutputs], int j,
                                    const Results<Value, kOutputs>& values) {
#pragma unroll
  for (int o = 0; o < kOutputs; ++o) result[o].elem[j] = static_cast<T>(values.values[o]);
}

// One trip a block: the grid covers the tensor, and no thread loops. H200, relu, % of a device
// copy on 1 and 16 MiB (calls of 5 to 13 microseconds): a grid-stride loop with a separate loop
// for the scalar tail read 1.5 to 2.5 points lower than this form, and behind eager PyTorch; the
// two were even from 256 MiB up.
template <int kArity, int kOutputs, int kVec, int kUnroll, typename T, typename Fn>
__global__ void __launch_bounds__(kElementwiseThreads)
    elementwise_kernel(OutputPointers<T, kOutputs> out, InputPointers<T, kArity> in, int64_t n,
                       Fn fn) {
  const int64_t num_packs = n / kVec;
  const int64_t first =
      static_cast<int64_t>(blockIdx.x) * (kElementwiseThreads * kUnroll) + threadIdx.x;
  Pack<T, kVec> packs[kUnroll][kArity];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t p = first + u * kElementwiseThreads;  // coalesced across the warp
    if (p < num_packs) {
#pragma unroll
      for (int a = 0; a < kArity; ++a) packs[u][a] = load_pack<T, kVec>(in.ptr[a] + p * kVec);
    }
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t p = first + u * kElementwiseThreads;
    if (p < num_packs) {
      Pack<T, kVec> result[kOutputs];
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        put(result, j, apply_at(fn, packs[u], j, std::make_index_sequence<kArity>{}));
#pragma unroll
      for (int o = 0; o < kOutputs; ++o) store_pack<T, kVec>(out.ptr[o] + p * kVec, result[o]);
    } else if (kVec > 1 && p == num_packs) {
      // The elements after the last whole pack (fewer than kVec), one at a time; kept rolled,
      // as one thread of the grid runs it.
#pragma unroll 1
      for (int64_t i = num_packs * kVec; i < n; ++i) {
        Pack<T, 1> scalars[kArity];
#pragma unroll
        for (int a = 0; a < kArity; ++a) scalars[a].elem[0] = in.ptr[a][i];
        Pack<T, 1> tail[kOutputs];
        put(tail, 0, apply_at(fn, scalars, 0, std::make_index_sequence<kArity>{}));
#pragma unroll
        for (int o = 0; o < kOutputs; ++o) out.ptr[o][i] = tail[o].elem[0];
      }
    }
  }
}

// Runs `fn` over the dense buffers on their stream, writing one output per value `fn` returns.
// The caller (the op's CUDA binding, opgen/elementwise_cuda.h) holds the device guard, has
// checked the inputs and allocated the outputs.
template <typename T, int kInputs, int kOutputs, typename Fn>
void launch_elementwise(const ElementwiseBuffers<kInputs, kOutputs>& buffers, Fn fn) {
  const int64_t n = buffers.numel;
  if (n == 0) return;
  InputPointers<T, kInputs> in;
  OutputPointers<T, kOutputs> out;
  // Views with a storage offset can start off a 16-byte boundary; those take the scalar path.
  bool aligned = true;
  for (int i = 0; i < kInputs; ++i) {
    in.ptr[i] = static_cast<const T*>(buffers.inputs[i]);
    aligned = aligned && is_aligned(in.ptr[i], kVectorBytes);
  }
  for (int o = 0; o < kOutputs; ++o) {
    out.ptr[o] = static_cast<T*>(buffers.outputs[o]);
    aligned = aligned && is_aligned(out.ptr[o], kVectorBytes);
  }
  const cudaStream_t stream = buffers.stream;
  constexpr int kVec = pack_size<T>();
  constexpr int kUnroll = PacksPerThread<Fn>::value;
  // Blocks whose threads cover `packs` packs (the partial pack after the last whole one
  // included), `unroll` a thread.
  const auto blocks_for = [n](int64_t packs, int unroll) {
    const int64_t per_block = static_cast<int64_t>(kElementwiseThreads) * unroll;
    const int64_t blocks = (packs + per_block - 1) / per_block;
    // 2^31 - 1 blocks of 128 threads cover 2^38 packs (values, when unaligned): 512 GiB of
    // 16-bit values at the least, past the memory of any GPU so far.
    TORCH_CHECK(blocks <= std::numeric_limits<int32_t>::max(), "opgen: ", n,
                " elements are more than one kernel launch covers; split the tensor into parts");
    return static_cast<unsigned>(blocks);
  };
  const int64_t packs = (n + kVec - 1) / kVec;
  if (!aligned) {
    elementwise_kernel<kInputs, kOutputs, 1, kUnroll, T>
        <<<blocks_for(n, kUnroll), kElementwiseThreads, 0, stream>>>(out, in, n, fn);
  } else if (kUnroll > 1 && blocks_for(packs, kUnroll) < 2u * multiprocessor_count()) {
    // Too few blocks to give every multiprocessor two: latency bounds such a tensor, not
    // instructions, and one pack a thread spreads it over kUnroll times the threads. H200, gelu on
    // 1 MiB of float32, % of a device copy: 77 at 4 packs a thread, 91 at 1.
    elementwise_kernel<kInputs, kOutputs, kVec, 1, T>
        <<<blocks_for(packs, 1), kElementwiseThreads, 0, stream>>>(out, in, n, fn);
  } else {
    elementwise_kernel<kInputs, kOutputs, kVec, kUnroll, T>
        <<<blocks_for(packs, kUnroll), kElementwiseThreads, 0, stream>>>(out, in, n, fn);
  }
  OPGEN_CHECK_LAUNCH();
}

// An op's forward kernels (its <op>_cuda.cu calls this): output = forward(inputs...), the
// functor for the buffers' dtype and the op's params chosen by the op's Functors.
template <class Functors, int kInputs, class... Params>
void elementwise_forward_kernels(const ElementwiseBuffers<kInputs, 1>& buffers,
                                 const Params&... params) {
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, buffers.dtype, "elementwise_forward", [&] {
        Functors::template forward<scalar_t>(
            [&](auto forward) { launch_elementwise<scalar_t>(buffers, forward); }, params...);
      });
}

// An op's backward kernels: each input's gradient from the incoming gradient (inputs[0]) and
// the inputs, in one pass.
template <class Functors, int kInputs, int kOutputs, class... Params>
void elementwise_backward_kernels(const ElementwiseBuffers<kInputs, kOutputs>& buffers,
                                  const Params&... params) {
  static_assert(kInputs == kOutputs + 1, "the incoming gradient, then the op's inputs");
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kHalf, at::kBFloat16, buffers.dtype, "elementwise_backward", [&] {
        Functors::template backward<scalar_t>(
            [&](auto backward) { launch_elementwise<scalar_t>(buffers, backward); }, params...);
      });
}

// The tensor forms (at::Tensor, or any type with numel(), const_data_ptr() and mutable_data_ptr()),
// on the current stream: the CUDA files of elementwise ops that opgen rendered before the kernels
// took buffers call these (or opgen::OnCuda::launch), so they still build against these headers,
// until `opgen update` renders their current form.
template <typename T, typename Tensor, std::size_t kOutputs, typename Fn, typename... Tensors>
void launch_elementwise(const std::array<Tensor, kOutputs>& outs, Fn fn, const Tensors&... inputs) {
  ElementwiseBuffers<static_cast<int>(sizeof...(Tensors)), static_cast<int>(kOutputs)> buffers{};
  buffers.numel = outs[0].numel();
  int i = 0;
  ((buffers.inputs[i++] = inputs.const_data_ptr()), ...);
  for (std::size_t o = 0; o < kOutputs; ++o) buffers.outputs[o] = outs[o].mutable_data_ptr();
  buffers.stream = c10::cuda::getCurrentCUDAStream();
  launch_elementwise<T>(buffers, fn);
}

template <typename T, typename Tensor, typename Fn, typename... Tensors>
void launch_elementwise(const Tensor& out, Fn fn, const Tensors&... inputs) {
  launch_elementwise<T>(std::array<Tensor, 1>{out}, fn, inputs...);
}

}  // namespace opgen
