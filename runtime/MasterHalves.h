// fp32 master weights kept as two 16-bit halves: the high half is the bf16 weight the device
// streams, the low half the bits that give the master back exactly (12 bytes a parameter).
#ifndef MT_RUNTIME_MASTERHALVES_H
#define MT_RUNTIME_MASTERHALVES_H

#include <cstdint>
#include <cstring>

// The halves' functions serve the device's AdamW too (runtime/cuda/kernels/AdamW.cu).
#ifdef __CUDACC__
#define MT_HOST_DEVICE __host__ __device__
#else
#define MT_HOST_DEVICE
#endif

namespace mt {

/// The high half of a master's bits: the master rounded to bfloat16, to nearest with ties away
/// from zero (nearest even would leave two masters a half apart with one pair of halves), a
/// NaN kept a quiet NaN. Away from zero the rounding is one integer add on the bits.
MT_HOST_DEVICE inline uint16_t highHalf(uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x8000u) >> 16);
}

/// Whether a high half is a NaN's: its low half holds the NaN's low bits as they are.
MT_HOST_DEVICE inline bool isNanHalf(uint16_t high) { return (high & 0x7fffu) > 0x7f80u; }

/// The master of `high` and `low`: the high half's bits plus the low half as a signed
/// 16-bit difference (negative where the high half was rounded up); a NaN's halves side by
/// side, so that a quiet NaN comes back bit for bit (a signaling one quieted).
MT_HOST_DEVICE inline float joinHalves(uint16_t high, uint16_t low) {
  const uint32_t top = static_cast<uint32_t>(high) << 16;
  uint32_t bits =
      isNanHalf(high)
          ? top | low
          : top + static_cast<uint32_t>(static_cast<int32_t>(static_cast<int16_t>(low)));
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

/// Splits `value` into its halves: joinHalves(high, low) gives it back bit for bit (a NaN
/// quieted).
MT_HOST_DEVICE inline void splitMaster(float value, uint16_t &high, uint16_t &low) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  high = highHalf(bits);
  low = static_cast<uint16_t>(bits);
}

/// `n` masters joined from their halves into `to`, and split from `from` into halves.
inline void joinMasters(const uint16_t *high, const uint16_t *low, int64_t n, float *to) {
  for (int64_t i = 0; i < n; ++i)
    to[i] = joinHalves(high[i], low[i]);
}
inline void splitMasters(const float *from, int64_t n, uint16_t *high, uint16_t *low) {
  for (int64_t i = 0; i < n; ++i)
    splitMaster(from[i], high[i], low[i]);
}

} // namespace mt

#endif // MT_RUNTIME_MASTERHALVES_H
