// AdamW: the update, the learning-rate schedule and global-norm clipping.
#include "runtime/AdamW.h"

#include "runtime/MasterHalves.h"
#include "runtime/ThreadPool.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <immintrin.h>

namespace mt {

std::string adamwSettingsError(const plan::AdamW &config) {
  struct Setting {
    const char *flag;
    double value, low;
    bool lowIncluded, belowOne;
  } settings[] = {
      {"--lr", config.lr(), 0, true, false},
      {"--beta1", config.beta1(), 0, true, true},
      {"--beta2", config.beta2(), 0, true, true},
      {"--eps", config.eps(), 0, false, false},
      {"--weight-decay", config.weight_decay(), 0, true, false},
      {"--grad-clip", config.grad_clip(), 0, true, false},
      {"--min-lr", config.min_lr(), 0, true, false},
  };
  for (const Setting &s : settings) {
    bool inRange = std::isfinite(s.value) && (s.lowIncluded ? s.value >= s.low : s.value > s.low) &&
                   (!s.belowOne || s.value < 1);
    if (!inRange) {
      std::string range = s.belowOne      ? "in [0, 1)"
                          : s.lowIncluded ? "finite and >= 0"
                                          : "finite and > 0";
      std::ostringstream message;
      message << s.flag << " must be " << range << ", got " << s.value;
      return message.str();
    }
  }
  if (config.warmup() < 0)
    return "--warmup must be a number of steps >= 0, got " + std::to_string(config.warmup());
  try {
    std::regex(config.no_decay());
  } catch (const std::regex_error &error) {
    return "--no-decay '" + config.no_decay() + "' is not a regular expression: " + error.what();
  }
  return "";
}

std::vector<WeightDecay> weightDecays(const plan::Plan &plan, const plan::AdamW &config,
                                      const std::vector<float> &centers) {
  std::regex noDecay(config.no_decay().empty() ? "$^" : config.no_decay());
  std::vector<WeightDecay> decays;
  for (int p = 0; p < plan.parameters_size(); ++p) {
    const plan::Parameter &parameter = plan.parameters(p);
    bool exempt = std::regex_search(parameter.name(), noDecay) ||
                  std::regex_search(parameter.source_name(), noDecay);
    decays.push_back({exempt ? 0.0 : config.weight_decay(), centers[p]});
  }
  return decays;
}

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

double combineLanes(double *lanes) {
  for (int width = kAdamWSquareLanes / 2; width > 0; width /= 2)
    for (int j = 0; j < width; ++j)
      lanes[j] += lanes[j + width];
  return lanes[0];
}

void squaresScalar(const float *values, int64_t begin, int64_t end, double *lanes) {
  for (int64_t i = begin; i < end; ++i)
    lanes[(i - begin) % kAdamWSquareLanes] += static_cast<double>(values[i]) * values[i];
}

/// 16 floats' squares into the 16 lanes: the first 8 to `first` (lanes 0-7), the rest to
/// `last`. The update loop calls it on the gradient it loads.
__attribute__((target("avx512f"))) inline void addSquares(__m512 values, __m512d &first,
                                                          __m512d &last) {
  __m512d a = _mm512_cvtps_pd(_mm512_castps512_ps256(values));
  __m512d b =
      _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(values), 1)));
  first = _mm512_add_pd(first, _mm512_mul_pd(a, a));
  last = _mm512_add_pd(last, _mm512_mul_pd(b, b));
}

/// 8 floats' squares into 8 of the lanes: the first 4 to `first`, the rest to `last`.
__attribute__((target("avx2"))) inline void addSquares(__m256 values, __m256d &first,
                                                       __m256d &last) {
  __m256d a = _mm256_cvtps_pd(_mm256_castps256_ps128(values));
  __m256d b = _mm256_cvtps_pd(_mm256_extractf128_ps(values, 1));
  first = _mm256_add_pd(first, _mm256_mul_pd(a, a));
  last = _mm256_add_pd(last, _mm256_mul_pd(b, b));
}

__attribute__((target("avx512f"))) void squaresAvx512(const float *values, int64_t begin,
                                                      int64_t end, double *lanes) {
  __m512d first = _mm512_loadu_pd(lanes), last = _mm512_loadu_pd(lanes + 8);
  int64_t i = begin;
  for (; i + kAdamWSquareLanes <= end; i += kAdamWSquareLanes)
    addSquares(_mm512_loadu_ps(values + i), first, last);
  _mm512_storeu_pd(lanes, first);
  _mm512_storeu_pd(lanes + 8, last);
  squaresScalar(values, i, end, lanes);
}

__attribute__((target("avx2"))) void squaresAvx2(const float *values, int64_t begin, int64_t end,
                                                 double *lanes) {
  __m256d sums[4];
  for (int k = 0; k < 4; ++k)
    sums[k] = _mm256_loadu_pd(lanes + 4 * k);
  int64_t i = begin;
  for (; i + kAdamWSquareLanes <= end; i += kAdamWSquareLanes) {
    addSquares(_mm256_loadu_ps(values + i), sums[0], sums[1]);
    addSquares(_mm256_loadu_ps(values + i + 8), sums[2], sums[3]);
  }
  for (int k = 0; k < 4; ++k)
    _mm256_storeu_pd(lanes + 4 * k, sums[k]);
  squaresScalar(values, i, end, lanes);
}

using SquaresRange = void (*)(const float *, int64_t, int64_t, double *);

enum class VectorUnit { Scalar, Avx2, Avx512 };

/// The widest unit this CPU has, or the narrower one MT_VECTOR_UNIT names (scalar, avx2),
/// so that a test can run every path the CPU has.
VectorUnit vectorUnit() {
  static const VectorUnit chosen = [] {
    VectorUnit widest = __builtin_cpu_supports("avx512f") ? VectorUnit::Avx512
                        : __builtin_cpu_supports("avx2")  ? VectorUnit::Avx2
                                                          : VectorUnit::Scalar;
    const char *asked = std::getenv("MT_VECTOR_UNIT");
    if (!asked || !*asked)
      return widest;
    if (std::strcmp(asked, "scalar") == 0)
      return VectorUnit::Scalar;
    if (std::strcmp(asked, "avx2") == 0 && widest != VectorUnit::Scalar)
      return VectorUnit::Avx2;
    if (std::strcmp(asked, "avx512") == 0 && widest == VectorUnit::Avx512)
      return VectorUnit::Avx512;
    throw std::runtime_error(std::string("MT_VECTOR_UNIT=") + asked +
                             ": this CPU's units are scalar, avx2, avx512, up to its widest");
  }();
  return chosen;
}

/// The path of the chosen vector unit.
template <typename Path> Path forVectorUnit(Path scalar, Path avx2, Path avx512) {
  VectorUnit unit = vectorUnit();
  return unit == VectorUnit::Avx512 ? avx512 : unit == VectorUnit::Avx2 ? avx2 : scalar;
}

SquaresRange vectorSquares() {
  return forVectorUnit<SquaresRange>(squaresScalar, squaresAvx2, squaresAvx512);
}

double chunkSquares(SquaresRange squares, const float *values, int64_t begin, int64_t end) {
  double lanes[kAdamWSquareLanes] = {};
  squares(values, begin, end, lanes);
  return combineLanes(lanes);
}

} // namespace

double sumInOrder(const std::vector<double> &partial) {
  double sum = 0;
  for (double x : partial)
    sum += x;
  return sum;
}

double squaredNorm(const float *values, int64_t count) {
  int64_t chunks = (count + kAdamWNormChunk - 1) / kAdamWNormChunk;
  std::vector<double> partial(chunks, 0.0);
  SquaresRange squares = vectorSquares(); // here: the pool's workers must not throw
  runParallel(chunks, [&](int64_t c) {
    partial[c] = chunkSquares(squares, values, c * kAdamWNormChunk,
                              std::min(count, (c + 1) * kAdamWNormChunk));
  });
  return sumInOrder(partial);
}

double squaredNormScalar(const float *values, int64_t count) {
  std::vector<double> partial;
  for (int64_t begin = 0; begin < count; begin += kAdamWNormChunk)
    partial.push_back(
        chunkSquares(squaresScalar, values, begin, std::min(count, begin + kAdamWNormChunk)));
  return sumInOrder(partial);
}

float clipScale(double norm, double maxNorm) {
  return maxNorm > 0 && norm > maxNorm ? static_cast<float>(maxNorm / (norm + 1e-6)) : 1.0f;
}

AdamWConstants::AdamWConstants(const plan::AdamW &config, double lr, double weightDecay,
                               int64_t step, float gradScale, float decayCenter)
    : gradScale(gradScale), decay(static_cast<float>(1.0 - lr * weightDecay)), center(decayCenter),
      beta1(config.beta1()), oneMinusBeta1(1 - beta1), beta2(config.beta2()),
      oneMinusBeta2(1 - beta2),
      negativeStepSize(-static_cast<float>(lr / (1.0 - std::pow(config.beta1(), step)))),
      correction2Sqrt(static_cast<float>(std::sqrt(1.0 - std::pow(config.beta2(), step)))),
      eps(config.eps()) {}

namespace {

/// Master i of `w` as a float, and back.
float loadMaster(const MasterWeights &w, int64_t i) {
  return w.values ? w.values[i] : joinHalves(w.high[i], w.low[i]);
}
void storeMaster(const MasterWeights &w, int64_t i, float value) {
  if (w.values)
    w.values[i] = value;
  else
    splitMaster(value, w.high[i], w.low[i]);
}

/// The same fp32 operations in the same order as torch's single-tensor AdamW, and the
/// gradient's squares into the lanes of a chunk that starts at `origin`.
void updateElements(const AdamWConstants &k, const MasterWeights &w, float *m, float *v,
                    const float *grad, int64_t begin, int64_t end, double *lanes, int64_t origin) {
  for (int64_t i = begin; i < end; ++i) {
    lanes[(i - origin) % kAdamWSquareLanes] += static_cast<double>(grad[i]) * grad[i];
    float g = grad[i] * k.gradScale; // torch's clip_grad_norm_ scales in place, in fp32
    float p = (loadMaster(w, i) - k.center) * k.decay + k.center;
    m[i] = m[i] * k.beta1 + g * k.oneMinusBeta1;
    v[i] = v[i] * k.beta2 + g * g * k.oneMinusBeta2;
    float denom = std::sqrt(v[i]) / k.correction2Sqrt + k.eps;
    p += k.negativeStepSize * (m[i] / denom);
    storeMaster(w, i, p);
  }
}

/// One chunk's update: the chunk's gradient squares go to `lanes` as squaresScalar puts them.
void updateScalar(const AdamWConstants &k, const MasterWeights &w, float *m, float *v,
                  const float *grad, int64_t begin, int64_t end, double *lanes) {
  updateElements(k, w, m, v, grad, begin, end, lanes, begin);
}

// 16 masters at once: joined from their halves as joinHalves does (the high half shifted up,
// the low half added as a signed difference, a NaN's put side by side), split as splitMaster
// does.
__attribute__((target("avx512f"))) __m512 loadMasters16(const MasterWeights &w, int64_t i) {
  if (w.values)
    return _mm512_loadu_ps(w.values + i);
  __m512i high = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<__m256i *>(w.high + i)));
  __m256i lowHalves = _mm256_loadu_si256(reinterpret_cast<__m256i *>(w.low + i));
  __m512i top = _mm512_slli_epi32(high, 16);
  __m512i bits = _mm512_add_epi32(top, _mm512_cvtepi16_epi32(lowHalves));
  __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(high, _mm512_set1_epi32(0x7fff)),
                                          _mm512_set1_epi32(0x7f80));
  bits = _mm512_mask_mov_epi32(bits, nan, _mm512_or_si512(top, _mm512_cvtepu16_epi32(lowHalves)));
  return _mm512_castsi512_ps(bits);
}

__attribute__((target("avx512f"))) void storeMasters16(const MasterWeights &w, int64_t i,
                                                       __m512 p) {
  if (w.values) {
    _mm512_storeu_ps(w.values + i, p);
    return;
  }
  __m512i bits = _mm512_castps_si512(p);
  __m512i high = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_set1_epi32(0x8000)), 16);
  __mmask16 nan = _mm512_cmp_ps_mask(p, p, _CMP_UNORD_Q);
  high = _mm512_mask_mov_epi32(
      high, nan, _mm512_or_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(0x40)));
  _mm256_storeu_si256(reinterpret_cast<__m256i *>(w.high + i), _mm512_cvtepi32_epi16(high));
  _mm256_storeu_si256(reinterpret_cast<__m256i *>(w.low + i), _mm512_cvtepi32_epi16(bits));
}

// The vector paths do the scalar path's operations one by one (no fused multiply-add), so
// their results are bit-identical to it; they square the gradient as it is loaded.
__attribute__((target("avx512f"))) void updateAvx512(const AdamWConstants &k,
                                                     const MasterWeights &w, float *m, float *v,
                                                     const float *grad, int64_t begin, int64_t end,
                                                     double *lanes) {
  const __m512 gradScale = _mm512_set1_ps(k.gradScale), decay = _mm512_set1_ps(k.decay),
               center = _mm512_set1_ps(k.center), beta1 = _mm512_set1_ps(k.beta1),
               oneMinusBeta1 = _mm512_set1_ps(k.oneMinusBeta1), beta2 = _mm512_set1_ps(k.beta2),
               oneMinusBeta2 = _mm512_set1_ps(k.oneMinusBeta2),
               stepSize = _mm512_set1_ps(k.negativeStepSize),
               correction = _mm512_set1_ps(k.correction2Sqrt), eps = _mm512_set1_ps(k.eps);
  static_assert(kAdamWSquareLanes == 16, "16 floats a vector, 8 doubles a half");
  __m512d firstLanes = _mm512_loadu_pd(lanes), lastLanes = _mm512_loadu_pd(lanes + 8);
  int64_t i = begin;
  for (; i + 16 <= end; i += 16) {
    __m512 raw = _mm512_loadu_ps(grad + i);
    addSquares(raw, firstLanes, lastLanes);
    __m512 g = _mm512_mul_ps(raw, gradScale);
    __m512 p =
        _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(loadMasters16(w, i), center), decay), center);
    __m512 mi = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(m + i), beta1),
                              _mm512_mul_ps(g, oneMinusBeta1));
    __m512 vi = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(v + i), beta2),
                              _mm512_mul_ps(_mm512_mul_ps(g, g), oneMinusBeta2));
    __m512 denom = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), correction), eps);
    p = _mm512_add_ps(p, _mm512_mul_ps(stepSize, _mm512_div_ps(mi, denom)));
    storeMasters16(w, i, p);
    _mm512_storeu_ps(m + i, mi);
    _mm512_storeu_ps(v + i, vi);
  }
  _mm512_storeu_pd(lanes, firstLanes);
  _mm512_storeu_pd(lanes + 8, lastLanes);
  updateElements(k, w, m, v, grad, i, end, lanes, begin);
}

// 8 masters at once for AVX2, as the AVX-512 pair does; AVX2 has no narrowing store, so the
// halves are packed (within 128-bit lanes) and the pack's quarters put in order.
__attribute__((target("avx2"))) __m256 loadMasters8(const MasterWeights &w, int64_t i) {
  if (w.values)
    return _mm256_loadu_ps(w.values + i);
  __m256i high = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<__m128i *>(w.high + i)));
  __m128i lowHalves = _mm_loadu_si128(reinterpret_cast<__m128i *>(w.low + i));
  __m256i top = _mm256_slli_epi32(high, 16);
  __m256i bits = _mm256_add_epi32(top, _mm256_cvtepi16_epi32(lowHalves));
  __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(high, _mm256_set1_epi32(0x7fff)),
                                   _mm256_set1_epi32(0x7f80));
  bits = _mm256_blendv_epi8(bits, _mm256_or_si256(top, _mm256_cvtepu16_epi32(lowHalves)), nan);
  return _mm256_castsi256_ps(bits);
}

__attribute__((target("avx2"))) void storeMasters8(const MasterWeights &w, int64_t i, __m256 p) {
  if (w.values) {
    _mm256_storeu_ps(w.values + i, p);
    return;
  }
  __m256i bits = _mm256_castps_si256(p);
  __m256i high = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x8000)), 16);
  __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(p, p, _CMP_UNORD_Q));
  high = _mm256_blendv_epi8(
      high, _mm256_or_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(0x40)), nan);
  __m256i low = _mm256_and_si256(bits, _mm256_set1_epi32(0xffff));
  // Both fit 16 bits unsigned, which the saturating pack keeps: [h0-3 l0-3 h4-7 l4-7].
  __m256i halves = _mm256_permute4x64_epi64(_mm256_packus_epi32(high, low), 0xd8);
  _mm_storeu_si128(reinterpret_cast<__m128i *>(w.high + i), _mm256_castsi256_si128(halves));
  _mm_storeu_si128(reinterpret_cast<__m128i *>(w.low + i), _mm256_extracti128_si256(halves, 1));
}

__attribute__((target("avx2"))) void updateAvx2(const AdamWConstants &k, const MasterWeights &w,
                                                float *m, float *v, const float *grad,
                                                int64_t begin, int64_t end, double *lanes) {
  const __m256 gradScale = _mm256_set1_ps(k.gradScale), decay = _mm256_set1_ps(k.decay),
               center = _mm256_set1_ps(k.center), beta1 = _mm256_set1_ps(k.beta1),
               oneMinusBeta1 = _mm256_set1_ps(k.oneMinusBeta1), beta2 = _mm256_set1_ps(k.beta2),
               oneMinusBeta2 = _mm256_set1_ps(k.oneMinusBeta2),
               stepSize = _mm256_set1_ps(k.negativeStepSize),
               correction = _mm256_set1_ps(k.correction2Sqrt), eps = _mm256_set1_ps(k.eps);
  // Two vectors of 8 floats fill the 16 lanes: sums[0..1] the first's, sums[2..3] the next's.
  __m256d sums[4];
  for (int s = 0; s < 4; ++s)
    sums[s] = _mm256_loadu_pd(lanes + 4 * s);
  int64_t i = begin;
  for (; i + 8 <= end; i += 8) {
    __m256 raw = _mm256_loadu_ps(grad + i);
    int half = 2 * static_cast<int>(((i - begin) / 8) & 1);
    addSquares(raw, sums[half], sums[half + 1]);
    __m256 g = _mm256_mul_ps(raw, gradScale);
    __m256 p =
        _mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(loadMasters8(w, i), center), decay), center);
    __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), beta1),
                              _mm256_mul_ps(g, oneMinusBeta1));
    __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), beta2),
                              _mm256_mul_ps(_mm256_mul_ps(g, g), oneMinusBeta2));
    __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), correction), eps);
    p = _mm256_add_ps(p, _mm256_mul_ps(stepSize, _mm256_div_ps(mi, denom)));
    storeMasters8(w, i, p);
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
  }
  for (int s = 0; s < 4; ++s)
    _mm256_storeu_pd(lanes + 4 * s, sums[s]);
  updateElements(k, w, m, v, grad, i, end, lanes, begin);
}

using UpdateRange = void (*)(const AdamWConstants &, const MasterWeights &, float *, float *,
                             const float *, int64_t, int64_t, double *);

UpdateRange vectorUpdate() {
  return forVectorUnit<UpdateRange>(updateScalar, updateAvx2, updateAvx512);
}

} // namespace

const char *adamwVectorUnit() {
  return forVectorUnit<const char *>("scalar", "avx2", "avx512");
}

void adamwUpdateScalar(MasterWeights param, float *m, float *v, const float *grad, int64_t count,
                       double lr, double weightDecay, const plan::AdamW &config, int64_t step,
                       float decayCenter) {
  double lanes[kAdamWSquareLanes] = {};
  updateScalar(AdamWConstants(config, lr, weightDecay, step, 1.0f, decayCenter), param, m, v, grad,
               0, count, lanes);
}

double adamwUpdate(MasterWeights param, float *m, float *v, const float *grad, int64_t count,
                   double lr, double weightDecay, const plan::AdamW &config, int64_t step,
                   float gradScale, float decayCenter, bool guarded) {
  return adamwUpdate(param, m, v, grad, count,
                     AdamWConstants(config, lr, weightDecay, step, gradScale, decayCenter),
                     guarded);
}

double adamwUpdate(MasterWeights param, float *m, float *v, const float *grad, int64_t count,
                   const AdamWConstants &constants, bool guarded) {
  UpdateRange update = vectorUpdate();
  SquaresRange squares = vectorSquares();
  // Every element is independent: the chunks spread over all cores. Each gradient element is
  // squared as the update loads it: the norm costs no pass over memory of its own.
  int64_t chunks = (count + kAdamWNormChunk - 1) / kAdamWNormChunk;
  std::vector<double> partial(chunks, 0.0);
  runParallel(chunks, [&](int64_t c) {
    int64_t begin = c * kAdamWNormChunk, end = std::min(count, begin + kAdamWNormChunk);
    if (guarded) {
      // The chunk's gradient measured first, while it stays in cache: a chunk with a value
      // that is not finite keeps its weights (and so its bf16 copy) and moments.
      double measured = chunkSquares(squares, grad, begin, end);
      if (!std::isfinite(measured)) {
        partial[c] = measured;
        return;
      }
    }
    double lanes[kAdamWSquareLanes] = {};
    update(constants, param, m, v, grad, begin, end, lanes);
    partial[c] = combineLanes(lanes);
  });
  return sumInOrder(partial);
}

} // namespace mt
