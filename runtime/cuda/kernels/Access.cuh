// Element access inside device code for every storage: kernels compute in fp32 (reals) or
// int64 (integers) whatever the tensors hold, so one kernel serves bf16 and fp32 tensors.
#ifndef MT_RUNTIME_CUDA_KERNELS_ACCESS_CUH
#define MT_RUNTIME_CUDA_KERNELS_ACCESS_CUH

#include "runtime/cuda/DeviceTensor.h"

#include <cuda_bf16.h>

namespace mt::cuda {

__device__ __forceinline__ float loadReal(Ref ref, int64_t i) {
  if (ref.storage == Storage::BF16)
    return __bfloat162float(static_cast<const __nv_bfloat16 *>(ref.data)[i]);
  return static_cast<const float *>(ref.data)[i];
}

__device__ __forceinline__ void storeReal(Ref ref, int64_t i, float value) {
  if (ref.storage == Storage::BF16)
    static_cast<__nv_bfloat16 *>(ref.data)[i] = __float2bfloat16_rn(value);
  else
    static_cast<float *>(ref.data)[i] = value;
}

__device__ __forceinline__ int64_t loadInt(Ref ref, int64_t i) {
  switch (ref.storage) {
  case Storage::I64: return static_cast<const int64_t *>(ref.data)[i];
  case Storage::I32: return static_cast<const int32_t *>(ref.data)[i];
  case Storage::U8: return static_cast<const uint8_t *>(ref.data)[i];
  default: return static_cast<int64_t>(loadReal(ref, i));
  }
}

__device__ __forceinline__ void storeInt(Ref ref, int64_t i, int64_t value) {
  switch (ref.storage) {
  case Storage::I64: static_cast<int64_t *>(ref.data)[i] = value; break;
  case Storage::I32: static_cast<int32_t *>(ref.data)[i] = static_cast<int32_t>(value); break;
  case Storage::U8: static_cast<uint8_t *>(ref.data)[i] = static_cast<uint8_t>(value); break;
  default: storeReal(ref, i, static_cast<float>(value));
  }
}

/// Blocks of `threads` covering `n` items, for one-item-per-thread launches.
inline unsigned blocksFor(int64_t n, int threads = 256) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_KERNELS_ACCESS_CUH
