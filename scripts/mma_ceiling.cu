// Throughput ceilings of the matmul recipe's inner loop on this GPU, from include/opgen/tensor_core.cuh:
// (1) mma.sync alone, from registers; (2) the warp loop of the large 16-bit tile (ldmatrix from
// swizzled shared tiles, then the MMAs) with no global memory and no barriers. What
// docs/benchmarks/matmul quotes. Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -arch=sm_90 -I generated_ops/include -I $(python3 -c 'import torch, os;
//     print(os.path.join(os.path.dirname(torch.__file__), "include"))') scripts/mma_ceiling.cu -o mma_ceiling
#include <opgen/tensor_core.cuh>
#include <cstdio>
using namespace opgen::tc;

// (1) registers only: 32 independent m16n8k16 bf16 MMAs a step, as a 64x64 warp tile issues.
__global__ void __launch_bounds__(256, 1) mma_only(float* out, int steps) {
  Accumulator acc[4][8];
  FragmentA a[4];
  FragmentB b[8];
  for (int i = 0; i < 4; ++i) for (int r = 0; r < 4; ++r) a[i].reg[r] = threadIdx.x * 7 + i + r;
  for (int j = 0; j < 8; ++j) for (int r = 0; r < 2; ++r) b[j].reg[r] = threadIdx.x * 3 + j + r;
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) mma_m16n8k16_bf16(acc[i][j], a[i], b[j]);
  }
  float sum = 0;
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 8; ++j) for (int e = 0; e < 4; ++e) sum += acc[i][j].value[e];
  if (sum == 1.2345f) out[threadIdx.x] = sum;
}

// (2) the matmul's warp loop from shared memory: per k16, 4 A ldmatrix.x4 and 4 B ldmatrix.x4.trans
// from swizzled tiles, then 32 MMAs; no global memory, no barriers.
__global__ void __launch_bounds__(256, 1) smem_loop(float* out, int steps) {
  using TileA = SwizzledTile<c10::BFloat16, 128, 64>;
  using TileB = SwizzledTile<c10::BFloat16, 64, 256>;
  extern __shared__ __align__(128) unsigned char bytes[];
  auto* sa = reinterpret_cast<c10::BFloat16*>(bytes);
  auto* sb = sa + TileA::kElements;
  for (int i = threadIdx.x; i < TileA::kElements + TileB::kElements; i += blockDim.x) sa[i].x = (i * 37) & 0x3fff;
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = (warp / 4) * 64, wn = (warp % 4) * 64;
  Accumulator acc[4][8];
  for (int s = 0; s < steps; ++s) {
#pragma unroll
    for (int kk = 0; kk < 64; kk += 16) {
      FragmentA a[4];
      FragmentB b[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) load_a16<TileA, false>(a[i], sa, wm + i * 16, kk, lane);
#pragma unroll
      for (int j = 0; j < 8; j += 2) load_b16_pair<TileB, true>(b[j], b[j + 1], sb, kk, wn + j * 8, lane);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) mma_m16n8k16_bf16(acc[i][j], a[i], b[j]);
    }
  }
  float sum = 0;
  for (int i = 0; i < 4; ++i) for (int j = 0; j < 8; ++j) for (int e = 0; e < 4; ++e) sum += acc[i][j].value[e];
  if (sum == 1.2345f) out[threadIdx.x] = sum;
}

int main() {
  int sms;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float* out;
  cudaMalloc(&out, 1024 * sizeof(float));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const int smem = (128 * 64 + 64 * 256) * 2;
  cudaFuncSetAttribute(smem_loop, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  for (int blocks_per_sm : {1, 2}) {
    const int blocks = sms * blocks_per_sm;
    const int steps = 2000;
    mma_only<<<blocks, 256>>>(out, 10);
    cudaEventRecord(start);
    mma_only<<<blocks, 256>>>(out, steps * 4);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms;
    cudaEventElapsedTime(&ms, start, stop);
    double flops = double(blocks) * 8 * steps * 4 * 32 * 4096.0;
    printf("mma.sync registers only, %d blocks of 8 warps: %.1f TFLOP/s\n", blocks, flops / ms / 1e9);
    smem_loop<<<blocks, 256, smem>>>(out, 10);
    cudaEventRecord(start);
    smem_loop<<<blocks, 256, smem>>>(out, steps);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    cudaEventElapsedTime(&ms, start, stop);
    flops = double(blocks) * 8 * steps * 4 * 32 * 4096.0;
    printf("ldmatrix + mma.sync from shared memory, %d blocks of 8 warps: %.1f TFLOP/s (%s)\n", blocks, flops / ms / 1e9,
           cudaGetErrorString(cudaGetLastError()));
  }
  return 0;
}
