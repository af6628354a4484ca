// Element access inside device code for every storage: kernels compute in fp32 (reals) or
// int64 (integers) whatever the tensors hold, so one kernel serves bf16 and fp32 tensors.
#ifndef MT_RUNTIME_CUDA_KERNELS_ACCESS_CUH
#define MT_RUNTIME_CUDA_KERNELS_ACCESS_CUH

#include "runtime/cuda/DeviceTensor.h"

#include <cuda_bf16.h>

#include <cstdint>

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

/// Reals i..i+V-1 of `ref` into `out`: for V = 8 a 16-byte load of bf16 (two of fp32), which
/// needs i a multiple of 8 and the data 16-byte aligned (aligned16); for V = 1 one element.
template <int V> __device__ __forceinline__ void loadReals(Ref ref, int64_t i, float (&out)[V]) {
  static_assert(V == 1 || V == 8, "one element or a 16-byte piece of bf16");
  if constexpr (V == 1) {
    out[0] = loadReal(ref, i);
  } else if (ref.storage == Storage::BF16) {
    uint4 raw = *reinterpret_cast<const uint4 *>(static_cast<const __nv_bfloat16 *>(ref.data) + i);
    const __nv_bfloat162 *pairs = reinterpret_cast<const __nv_bfloat162 *>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float2 pair = __bfloat1622float2(pairs[k]);
      out[2 * k] = pair.x;
      out[2 * k + 1] = pair.y;
    }
  } else {
    const float4 *quads =
        reinterpret_cast<const float4 *>(static_cast<const float *>(ref.data) + i);
    float4 low = quads[0], high = quads[1];
    out[0] = low.x, out[1] = low.y, out[2] = low.z, out[3] = low.w;
    out[4] = high.x, out[5] = high.y, out[6] = high.z, out[7] = high.w;
  }
}

/// Stores `values` as reals i..i+V-1 of `ref`, as loadReals reads them.
template <int V>
__device__ __forceinline__ void storeReals(Ref ref, int64_t i, const float (&values)[V]) {
  if constexpr (V == 1) {
    storeReal(ref, i, values[0]);
  } else if (ref.storage == Storage::BF16) {
    uint4 raw;
    __nv_bfloat162 *pairs = reinterpret_cast<__nv_bfloat162 *>(&raw);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      pairs[k] = __floats2bfloat162_rn(values[2 * k], values[2 * k + 1]);
    *reinterpret_cast<uint4 *>(static_cast<__nv_bfloat16 *>(ref.data) + i) = raw;
  } else {
    float4 *quads = reinterpret_cast<float4 *>(static_cast<float *>(ref.data) + i);
    quads[0] = make_float4(values[0], values[1], values[2], values[3]);
    quads[1] = make_float4(values[4], values[5], values[6], values[7]);
  }
}

/// Whether a tensor's data may be read and written in 16-byte pieces.
inline bool aligned16(Ref ref) { return reinterpret_cast<uintptr_t>(ref.data) % 16 == 0; }

/// Blocks of `threads` covering `n` items, for one-item-per-thread launches.
inline unsigned blocksFor(int64_t n, int threads = 256) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_KERNELS_ACCESS_CUH
