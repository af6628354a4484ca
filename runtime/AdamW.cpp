// AdamW: the update, the learning-rate schedule and global-norm clipping.
#include "runtime/AdamW.h"

#include <algorithm>
#include <cmath>
#include <thread>

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

double clipGradients(std::vector<std::vector<float>> &gradients, double maxNorm) {
  double sum = 0;
  for (const std::vector<float> &g : gradients)
    for (float x : g)
      sum += static_cast<double>(x) * x;
  double norm = std::sqrt(sum);
  if (maxNorm > 0 && norm > maxNorm) {
    float scale = static_cast<float>(maxNorm / (norm + 1e-6));
    for (std::vector<float> &g : gradients)
      for (float &x : g)
        x *= scale;
  }
  return norm;
}

void adamwUpdate(float *param, float *m, float *v, const float *grad, int64_t count, double lr,
                 double weightDecay, const plan::AdamW &config, int64_t step) {
  // The same fp32 operations in the same order as torch's single-tensor AdamW.
  const float beta1 = config.beta1(), beta2 = config.beta2();
  const float decay = static_cast<float>(1.0 - lr * weightDecay);
  const double correction1 = 1.0 - std::pow(config.beta1(), step);
  const float stepSize = static_cast<float>(lr / correction1);
  const float correction2Sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(config.beta2(), step)));
  const float eps = config.eps();
  auto update = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float g = grad[i];
      param[i] *= decay;
      m[i] = m[i] * beta1 + g * (1 - beta1);
      v[i] = v[i] * beta2 + g * g * (1 - beta2);
      float denom = std::sqrt(v[i]) / correction2Sqrt + eps;
      param[i] += -stepSize * (m[i] / denom);
    }
  };
  // Large tensors are split across cores; each element's update is independent.
  int64_t threads = std::clamp<int64_t>(count / (1 << 16), 1, std::thread::hardware_concurrency());
  std::vector<std::thread> workers;
  int64_t chunk = (count + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t)
    workers.emplace_back(update, t * chunk, std::min(count, (t + 1) * chunk));
  update(0, std::min(count, chunk));
  for (std::thread &worker : workers)
    worker.join();
}

} // namespace mt
