// 16-byte vector packs: one LDG.128/STG.128 per pack is what lets a memory-bound kernel reach
// the bandwidth ceiling; narrower accesses leave the load/store units as the bottleneck.
#pragma once

#include <c10/util/BFloat16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace opgen {

constexpr int kVectorBytes = 16;

// Elements of T in one 16-byte access (4 floats, 8 halves, 2 doubles).
template <typename T>
constexpr int pack_size() {
  return kVectorBytes / static_cast<int>(sizeof(T));
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T elem[N];
};

template <typename T, int N>
__device__ __forceinline__ Pack<T, N> load_pack(const T* ptr) {
  return *reinterpret_cast<const Pack<T, N>*>(ptr);
}

template <typename T, int N>
__device__ __forceinline__ void store_pack(T* ptr, const Pack<T, N>& pack) {
  *reinterpret_cast<Pack<T, N>*>(ptr) = pack;
}

// A 16-byte pack stored to global memory as one st.global.v4 instruction. store_pack leaves the
// store to the compiler, which splits some packs whose elements were converted one at a time into
// 2- and 4-byte stores (nvcc 13 for sm_90: the linear backward's bfloat16 packs went out as four
// 4-byte stores, or six 2-byte and one 4-byte; several of norm.cuh's packs too), and a
// memory-bound kernel then issues several store instructions per pack. The "memory" clobber keeps
// the compiler from moving other memory accesses across the store, as an ordinary store would.
template <typename T, int N>
__device__ __forceinline__ void store_pack_global(T* ptr, const Pack<T, N>& pack) {
  static_assert(sizeof(Pack<T, N>) == 16, "store_pack_global stores 16-byte packs");
  uint32_t words[4];
  memcpy(words, &pack, sizeof(words));
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(words[0]), "r"(words[1]),
               "r"(words[2]), "r"(words[3])
               : "memory");
}

// Element j of a pack as M (float for the 16-bit types). A bfloat16 is the top half of a float:
// one shift widens the low element of each 32-bit pair and one mask the high one, where the
// element-wise cast first extracts the high one (PRMT, then the shift).
template <typename M, typename T, int N>
__device__ __forceinline__ M widen(const Pack<T, N>& pack, int j) {
  if constexpr (std::is_same_v<T, c10::BFloat16> && std::is_same_v<M, float> && N % 2 == 0) {
    uint32_t pair;
    memcpy(&pair, &pack.elem[j - j % 2], sizeof(pair));
    return __uint_as_float(j % 2 == 0 ? pair << 16 : pair & 0xffff0000u);
  } else {
    return static_cast<M>(pack.elem[j]);
  }
}

// The read-only inputs of a kernel, passed by value as one kernel argument.
template <typename T, int kArity>
struct InputPointers {
  const T* ptr[kArity];
};

// The outputs of a kernel (several for the backward of an op with several inputs), likewise.
template <typename T, int kOutputs>
struct OutputPointers {
  T* ptr[kOutputs];
};

inline bool is_aligned(const void* ptr, int64_t alignment_bytes) {
  return reinterpret_cast<std::uintptr_t>(ptr) % alignment_bytes == 0;
}

}  // namespace opgen
