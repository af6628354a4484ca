// AdamW: the update, the learning-rate schedule and global-norm clipping.
#include "runtime/AdamW.h"

#include "runtime/ThreadPool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <immintrin.h>

namespace mt {

double learningRate(const plan::AdamW &config, int64_t step, int64_t totalSteps) {
  if (config.warmup() > 0 && step <= config.warmup())
    return config.lr() * static_cast<double>(step) / static_cast<double>(config.warmup());
  if (config.schedule() != "cosine" || totalSteps <= config.warmup())
    return config.lr();
  double progress = static_cast<double>(step - config.warmup()) /
                    static_cast<double>(totalSteps - config.warmup());
  progress = std::min(progress, 1.0);
  return config.min_lr() + 0.5 * (config.lr() - config.min_lr()) * (1 + std::cos(M_PI * progress));
}

namespace {

/// squaredNorm's chunks: fixed, summed in order, so the bits do not depend on the core count;
/// a whole number of vectors, so adamwUpdate can update by them.
constexpr int64_t kNormChunk = 1 << 16;

double chunkSquares(const float *values, int64_t begin, int64_t end) {
  double sum = 0;
  for (int64_t i = begin; i < end; ++i)
    sum += static_cast<double>(values[i]) * values[i];
  return sum;
}

double sumInOrder(const std::vector<double> &partial) {
  double sum = 0;
  for (double x : partial)
    sum += x;
  return sum;
}

} // namespace

double squaredNorm(const float *values, int64_t count) {
  int64_t chunks = (count + kNormChunk - 1) / kNormChunk;
  std::vector<double> partial(chunks, 0.0);
  runParallel(chunks, [&](int64_t c) {
    partial[c] = chunkSquares(values, c * kNormChunk, std::min(count, (c + 1) * kNormChunk));
  });
  return sumInOrder(partial);
}

float clipScale(double norm, double maxNorm) {
  return maxNorm > 0 && norm > maxNorm ? static_cast<float>(maxNorm / (norm + 1e-6)) : 1.0f;
}

uint16_t toBfloat16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x40); // a quiet NaN stays one
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1)) >> 16);
}

namespace {

/// The constants of one update, in the float precision torch's AdamW computes them.
struct AdamWStep {
  float gradScale, decay, beta1, oneMinusBeta1, beta2, oneMinusBeta2, negativeStepSize,
      correction2Sqrt, eps;

  AdamWStep(const plan::AdamW &config, double lr, double weightDecay, int64_t step,
            float gradScale)
      : gradScale(gradScale), decay(static_cast<float>(1.0 - lr * weightDecay)), beta1(config.beta1()),
        oneMinusBeta1(1 - beta1), beta2(config.beta2()), oneMinusBeta2(1 - beta2),
        negativeStepSize(-static_cast<float>(lr / (1.0 - std::pow(config.beta1(), step)))),
        correction2Sqrt(static_cast<float>(std::sqrt(1.0 - std::pow(config.beta2(), step)))),
        eps(config.eps()) {}
};

/// The same fp32 operations in the same order as torch's single-tensor AdamW.
void updateScalar(const AdamWStep &k, float *param, float *m, float *v, const float *grad,
                  uint16_t *bf16, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    float g = grad[i] * k.gradScale; // torch's clip_grad_norm_ scales in place, in fp32
    param[i] *= k.decay;
    m[i] = m[i] * k.beta1 + g * k.oneMinusBeta1;
    v[i] = v[i] * k.beta2 + g * g * k.oneMinusBeta2;
    float denom = std::sqrt(v[i]) / k.correction2Sqrt + k.eps;
    param[i] += k.negativeStepSize * (m[i] / denom);
    if (bf16)
      bf16[i] = toBfloat16(param[i]);
  }
}

// The vector paths do the scalar path's operations one by one (no fused multiply-add), so
// their results are bit-identical to it.
__attribute__((target("avx512f"))) void updateAvx512(const AdamWStep &k, float *param, float *m,
                                                     float *v, const float *grad, uint16_t *bf16,
                                                     int64_t begin, int64_t end) {
  const __m512 gradScale = _mm512_set1_ps(k.gradScale), decay = _mm512_set1_ps(k.decay), beta1 = _mm512_set1_ps(k.beta1),
               oneMinusBeta1 = _mm512_set1_ps(k.oneMinusBeta1), beta2 = _mm512_set1_ps(k.beta2),
               oneMinusBeta2 = _mm512_set1_ps(k.oneMinusBeta2),
               stepSize = _mm512_set1_ps(k.negativeStepSize),
               correction = _mm512_set1_ps(k.correction2Sqrt), eps = _mm512_set1_ps(k.eps);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m512 g = _mm512_mul_ps(_mm512_loadu_ps(grad + i), gradScale);
    __m512 p = _mm512_mul_ps(_mm512_loadu_ps(param + i), decay);
    __m512 mi = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(m + i), beta1),
                              _mm512_mul_ps(g, oneMinusBeta1));
    __m512 vi = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(v + i), beta2),
                              _mm512_mul_ps(_mm512_mul_ps(g, g), oneMinusBeta2));
    __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), correction), eps);
    p = _mm512_add_ps(p, _mm512_mul_ps(stepSize, _mm512_div_ps(mi, denom)));
    _mm512_storeu_ps(param + i, p);
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
    if (bf16) {
      // toBfloat16 on 16 lanes: round to nearest even, NaNs kept quiet.
      __m512i bits = _mm512_castps_si512(p);
      __m512i high = _mm512_srli_epi32(bits, 16);
      __m512i rounded = _mm512_srli_epi32(
          _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                                  _mm512_and_si512(high, _mm512_set1_epi32(1)))),
          16);
      __mmask16 nan = _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q);
      rounded = _mm512_mask_mov_epi32(rounded, nan,
                                      _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(bf16 + i), _mm512_cvtepi32_epi16(rounded));
    }
  }
  updateScalar(k, param, m, v, grad, bf16, i, end);
}

__attribute__((target("avx2"))) void updateAvx2(const AdamWStep &k, float *param, float *m,
                                                float *v, const float *grad, uint16_t *bf16,
                                                int64_t begin, int64_t end) {
  const __m256 gradScale = _mm256_set1_ps(k.gradScale), decay = _mm256_set1_ps(k.decay), beta1 = _mm256_set1_ps(k.beta1),
               oneMinusBeta1 = _mm256_set1_ps(k.oneMinusBeta1), beta2 = _mm256_set1_ps(k.beta2),
               oneMinusBeta2 = _mm256_set1_ps(k.oneMinusBeta2),
               stepSize = _mm256_set1_ps(k.negativeStepSize),
               correction = _mm256_set1_ps(k.correction2Sqrt), eps = _mm256_set1_ps(k.eps);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    __m256 g = _mm256_mul_ps(_mm256_loadu_ps(grad + i), gradScale);
    __m256 p = _mm256_mul_ps(_mm256_loadu_ps(param + i), decay);
    __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), beta1),
                              _mm256_mul_ps(g, oneMinusBeta1));
    __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), beta2),
                              _mm256_mul_ps(_mm256_mul_ps(g, g), oneMinusBeta2));
    __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), correction), eps);
    p = _mm256_add_ps(p, _mm256_mul_ps(stepSize, _mm256_div_ps(mi, denom)));
    _mm256_storeu_ps(param + i, p);
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    if (bf16)
      for (int j = 0; j < 8; ++j)
        bf16[i + j] = toBfloat16(param[i + j]);
  }
  updateScalar(k, param, m, v, grad, bf16, i, end);
}

using UpdateRange = void (*)(const AdamWStep &, float *, float *, float *, const float *,
                             uint16_t *, int64_t, int64_t);

UpdateRange vectorUpdate() {
  static const UpdateRange chosen = __builtin_cpu_supports("avx512f") ? updateAvx512
                                    : __builtin_cpu_supports("avx2")  ? updateAvx2
                                                                      : updateScalar;
  return chosen;
}

} // namespace

const char *adamwVectorUnit() {
  UpdateRange chosen = vectorUpdate();
  return chosen == updateAvx512 ? "avx512" : chosen == updateAvx2 ? "avx2" : "scalar";
}

void adamwUpdateScalar(float *param, float *m, float *v, const float *grad, int64_t count,
                       double lr, double weightDecay, const plan::AdamW &config, int64_t step,
                       uint16_t *bf16, float gradScale) {
  updateScalar(AdamWStep(config, lr, weightDecay, step, gradScale), param, m, v, grad, bf16, 0,
               count);
}

double adamwUpdate(float *param, float *m, float *v, const float *grad, int64_t count, double lr,
                   double weightDecay, const plan::AdamW &config, int64_t step, uint16_t *bf16,
                   float gradScale) {
  AdamWStep constants(config, lr, weightDecay, step, gradScale);
  UpdateRange update = vectorUpdate();
  // Every element is independent: the chunks spread over all cores. Each chunk's gradient
  // is squared first, which brings it into cache for the update: the norm costs no extra
  // pass over memory.
  int64_t chunks = (count + kNormChunk - 1) / kNormChunk;
  std::vector<double> partial(chunks, 0.0);
  runParallel(chunks, [&](int64_t c) {
    int64_t begin = c * kNormChunk, end = std::min(count, begin + kNormChunk);
    partial[c] = chunkSquares(grad, begin, end);
    update(constants, param, m, v, grad, bf16, begin, end);
  });
  return sumInOrder(partial);
}

} // namespace mt
