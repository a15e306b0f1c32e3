// 16-byte vector packs: one LDG.128/STG.128 per pack is what lets a memory-bound kernel reach
// the bandwidth ceiling; narrower accesses leave the load/store units as the bottleneck.
#pragma once

#include <c10/util/BFloat16.h>
#include <cuda_bf16.h>

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

// Four 32-bit words at ptr where `valid`, else zeros: one predicated 16-byte load, the zeros set
// beside it. Loaded as a uint4 (not through assembly), so nvcc folds a thread's consecutive packs
// into one address register and immediate offsets.
__device__ __forceinline__ void load_words_or_zero(uint32_t (&words)[4], const void* ptr,
                                                   bool valid) {
  uint4 loaded = make_uint4(0, 0, 0, 0);
  if (valid) loaded = *reinterpret_cast<const uint4*>(ptr);
  words[0] = loaded.x;
  words[1] = loaded.y;
  words[2] = loaded.z;
  words[3] = loaded.w;
}

// Four 32-bit words stored at ptr with one st.global.v4 (see store_pack_global).
__device__ __forceinline__ void store_words_global(void* ptr, const uint32_t (&words)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(ptr), "r"(words[0]), "r"(words[1]),
               "r"(words[2]), "r"(words[3])
               : "memory");
}

// A hint that the 128-byte line holding ptr will be read soon: it is brought into L2, nothing
// waits for it and no register receives it. ptr must point into an allocation.
__device__ __forceinline__ void prefetch_l2(const void* ptr) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(ptr));
}

// The same for `bytes` bytes from ptr (both multiples of 16), in one instruction the copy engine
// of an sm_90 SM carries out; nothing on older GPUs.
__device__ __forceinline__ void bulk_prefetch_l2(const void* ptr, uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(ptr), "r"(bytes) : "memory");
#else
  (void)ptr;
  (void)bytes;
#endif
}

// The pack at ptr where `valid`, else zeros. A 16-byte pack goes through load_words_or_zero:
// choosing between a loaded Pack of 16-bit values and a filled one made nvcc 13 select each
// 16-bit element on its own (two PRMTs a value: 97 of them in norm.cuh's bfloat16 forward).
template <typename T, int N>
__device__ __forceinline__ Pack<T, N> load_pack_or_zero(const T* ptr, bool valid) {
  Pack<T, N> pack;
  if constexpr (sizeof(Pack<T, N>) == 16) {
    uint32_t words[4];
    load_words_or_zero(words, ptr, valid);
    memcpy(&pack, words, sizeof(words));
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) pack.elem[j] = T(0);
    if (valid) pack = load_pack<T, N>(ptr);
  }
  return pack;
}

// A pack stored to global memory, a 16-byte one as one st.global.v4 instruction. store_pack
// leaves the store to the compiler, which splits some packs whose elements were converted one at
// a time into 2- and 4-byte stores (nvcc 13 for sm_90: the linear backward's bfloat16 packs went
// out as four 4-byte stores, or six 2-byte and one 4-byte; norm.cuh's bfloat16 y and dx packs, one
// pack in eight forward and one in two backward, likewise), and a memory-bound kernel then issues
// several store instructions per pack. The "memory" clobber keeps the compiler from moving other
// memory accesses across the store, as an ordinary store would. Packs of other sizes (the
// one-value paths) take the ordinary store.
template <typename T, int N>
__device__ __forceinline__ void store_pack_global(T* ptr, const Pack<T, N>& pack) {
  if constexpr (sizeof(Pack<T, N>) == 16) {
    uint32_t words[4];
    memcpy(words, &pack, sizeof(words));
    store_words_global(ptr, words);
  } else {
    store_pack<T, N>(ptr, pack);
  }
}

// A pack of T from N values of M, each rounded to nearest even as static_cast<T> rounds it.
// bfloat16 rounds two values an instruction (cvt.rn.bf16x2.f32), where the element-wise cast
// takes a conversion each and a permute to pair them: the same bits (NaN stays NaN), fewer
// instructions in a bfloat16 kernel's store loop.
template <typename T, int N, typename M>
__device__ __forceinline__ Pack<T, N> narrow(const M (&values)[N]) {
  Pack<T, N> pack;
  if constexpr (std::is_same_v<T, c10::BFloat16> && std::is_same_v<M, float> && N % 2 == 0) {
#pragma unroll
    for (int j = 0; j < N; j += 2) {
      const __nv_bfloat162 pair = __floats2bfloat162_rn(values[j], values[j + 1]);
      memcpy(&pack.elem[j], &pair, sizeof(pair));
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) pack.elem[j] = static_cast<T>(values[j]);
  }
  return pack;
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
