// CPU AdamW with torch.optim.AdamW's semantics: decoupled weight decay, bias correction, eps
// added outside the square root; fp32 master weights and moments.
#ifndef MT_RUNTIME_ADAMW_H
#define MT_RUNTIME_ADAMW_H

#include "plan/plan.pb.h"

#include <cstdint>
#include <vector>

namespace mt {

/// The learning rate of step `step` (from 1): linear warmup over `warmup` steps, then
/// constant or a cosine decay to `min_lr` at `totalSteps`.
double learningRate(const plan::AdamW &config, int64_t step, int64_t totalSteps);

/// The sum of squares of `count` values, on every core, in a fixed order.
double squaredNorm(const float *values, int64_t count);

/// Scales the gradients so that their global L2 norm is at most `maxNorm` (torch's
/// clip_grad_norm_); returns the norm before clipping. maxNorm <= 0 only measures.
double clipGradients(const std::vector<float *> &gradients, const std::vector<int64_t> &counts,
                     double maxNorm);

/// `value` rounded to bfloat16 (nearest even; NaN stays NaN): the copy the device streams.
uint16_t toBfloat16(float value);

/// The vector unit adamwUpdate uses on this CPU: "avx512", "avx2" or "scalar".
const char *adamwVectorUnit();

/// One update of one parameter in place, on every core: `step` counts from 1. With `bf16`,
/// also writes the updated weights rounded to bfloat16 (nearest even): the copy the CUDA
/// backend streams for the next forward. Every vector unit gives bit-identical results.
/// Returns squaredNorm(grad, count), bit for bit, summed while each chunk is in cache.
double adamwUpdate(float *param, float *m, float *v, const float *grad, int64_t count, double lr,
                 double weightDecay, const plan::AdamW &config, int64_t step,
                 uint16_t *bf16 = nullptr);

/// The scalar reference of adamwUpdate, one thread, for tests of the vector paths.
void adamwUpdateScalar(float *param, float *m, float *v, const float *grad, int64_t count,
                       double lr, double weightDecay, const plan::AdamW &config, int64_t step,
                       uint16_t *bf16 = nullptr);

} // namespace mt

#endif // MT_RUNTIME_ADAMW_H
