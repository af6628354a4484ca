// The constants of one AdamW update and the chunks its gradient norm is summed by: what the
// host's update (runtime/AdamW) and the device's (runtime/cuda/kernels) share, bit for bit.
#ifndef MT_RUNTIME_ADAMWCONSTANTS_H
#define MT_RUNTIME_ADAMWCONSTANTS_H

#include <cstdint>

namespace mt {

namespace plan {
class AdamW;
} // namespace plan

/// squaredNorm's chunks: fixed, summed in order (sumInOrder), so the bits do not depend on the
/// core count; a whole number of vectors, so adamwUpdate can update by them (and keep a chunk
/// whose gradient is not finite out of the state).
constexpr int64_t kAdamWNormChunk = 1 << 16;
/// A chunk's squares go to kAdamWSquareLanes double sums, element i to lane i mod the lanes,
/// added pairwise at the end (width 8, 4, 2, 1): every vector unit then adds in the same order
/// (the same bits), and the sums do not wait on each other, so the norm costs little beside
/// the update. A float's square is exact in double: only the sums round.
constexpr int kAdamWSquareLanes = 16;
/// The constants of one update, in the float precision torch's AdamW computes them: each
/// element's update is, in fp32 and in this order (no fused multiply-add), g = grad * gradScale;
/// p = (master - center) * decay + center; m = m * beta1 + g * oneMinusBeta1; v = v * beta2 +
/// g * g * oneMinusBeta2; p += negativeStepSize * (m / (sqrt(v) / correction2Sqrt + eps)).
/// A device's update that does the same gives the same bits.
struct AdamWConstants {
  float gradScale, decay, center, beta1, oneMinusBeta1, beta2, oneMinusBeta2, negativeStepSize,
      correction2Sqrt, eps;
  AdamWConstants(const plan::AdamW &config, double lr, double weightDecay, int64_t step,
                 float gradScale, float decayCenter);
};

} // namespace mt

#endif // MT_RUNTIME_ADAMWCONSTANTS_H
