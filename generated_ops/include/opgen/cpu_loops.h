// CPU loops shared by the ops' CPU kernels: parallel over elements or rows with at::parallel_for,
// math in the op's math type (float for half/bfloat16) so CPU and CUDA round the same way.
#pragma once

#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>

#include "opgen/results.h"

namespace opgen::cpu {

// Below this many elements a chunk is not worth a thread (at::internal::GRAIN_SIZE's reasoning).
constexpr int64_t kElementGrain = 32768;

// out_k[i] = fn(inputs[i]...).values[k] over contiguous tensors of equal numel: a functor
// returning opgen::Results<math_t, N> writes N outputs in one pass (the backward of an op with
// several inputs: one gradient per input).
template <typename T, std::size_t N, typename Fn, typename... Tensors>
void elementwise(const std::array<at::Tensor, N>& outs, Fn fn, const Tensors&... inputs) {
  using math_t = at::opmath_type<T>;
  std::array<T*, N> out_ptrs;
  for (std::size_t k = 0; k < N; ++k) out_ptrs[k] = outs[k].template mutable_data_ptr<T>();
  const auto in_ptrs = std::make_tuple(inputs.template const_data_ptr<T>()...);
  at::parallel_for(0, outs[0].numel(), kElementGrain, [&](int64_t begin, int64_t end) {
    std::apply(
        [&](const auto*... in) {
          for (int64_t i = begin; i < end; ++i) {
            const auto results = fn(static_cast<math_t>(in[i])...);
            for (std::size_t k = 0; k < N; ++k) out_ptrs[k][i] = static_cast<T>(results.values[k]);
          }
        },
        in_ptrs);
  });
}

// The common case, out[i] = fn(inputs[i]...): one output, fn's value converted straight to T.
template <typename T, typename Fn, typename... Tensors>
void elementwise(const at::Tensor& out, Fn fn, const Tensors&... inputs) {
  const auto one_result = [&fn](auto... values) {
    const auto value = fn(values...);
    Results<std::remove_const_t<decltype(value)>, 1> results;
    results.values[0] = value;
    return results;
  };
  elementwise<T>(std::array<at::Tensor, 1>{out}, one_result, inputs...);
}

// Calls fn(row) for every row in [0, rows), in parallel, with chunks of about kElementGrain
// elements so that short rows are batched and long rows still spread over threads.
template <typename Fn>
void for_each_row(int64_t rows, int64_t row_length, Fn fn) {
  const int64_t rows_per_chunk =
      std::max<int64_t>(1, kElementGrain / std::max<int64_t>(1, row_length));
  at::parallel_for(0, rows, rows_per_chunk, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) fn(row);
  });
}

// The K sums over i in [0, n) of term(i) (a std::array<Acc, K>), each kept as kSumLanes partial
// sums (lane i % kSumLanes) added pairwise at the end. One running sum is a chain of dependent
// adds that -O3 may not reorder (floating-point addition is not associative), so it runs at one add
// per add latency; independent lanes vectorize and pipeline. The order is fixed by n alone, so the
// bits do not depend on threads.
constexpr int kSumLanes = 8;

template <typename Acc, std::size_t K, typename Term>
inline std::array<Acc, K> lane_sums(int64_t n, Term term) {
  std::array<std::array<Acc, kSumLanes>, K> lanes{};
  int64_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (int lane = 0; lane < kSumLanes; ++lane) {
      const std::array<Acc, K> values = term(i + lane);
      for (std::size_t k = 0; k < K; ++k) lanes[k][lane] += values[k];
    }
  }
  for (int lane = 0; i + lane < n; ++lane) {
    const std::array<Acc, K> values = term(i + lane);
    for (std::size_t k = 0; k < K; ++k) lanes[k][lane] += values[k];
  }
  std::array<Acc, K> sums;
  for (std::size_t k = 0; k < K; ++k) {
    for (int width = kSumLanes / 2; width > 0; width /= 2)
      for (int lane = 0; lane < width; ++lane) lanes[k][lane] += lanes[k][lane + width];
    sums[k] = lanes[k][0];
  }
  return sums;
}

// One such sum: of term(i), an Acc.
template <typename Acc, typename Term>
inline Acc lane_sum(int64_t n, Term term) {
  return lane_sums<Acc, 1>(n, [&term](int64_t i) { return std::array<Acc, 1>{term(i)}; })[0];
}

}  // namespace opgen::cpu

namespace opgen {

// The CPU as a device of the shared elementwise host code (opgen/elementwise_op.h).
struct OnCpu {
  struct Guard {
    explicit Guard(c10::Device) {}  // nothing to select on the CPU
  };
  // The dispatcher sends only CPU tensors to a CPU kernel: nothing to check.
  static void check(const at::Tensor&, const char*, const char*) {}
  template <typename T, typename Out, typename Fn, typename... Tensors>
  static void launch(const Out& out, Fn fn, const Tensors&... inputs) {
    cpu::elementwise<T>(out, fn, inputs...);
  }
};

}  // namespace opgen
