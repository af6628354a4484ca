// Unit test of the CPU AdamW: the vector path against the scalar reference (bit for bit,
// every size and thread split), bfloat16 rounding, and the update rate on this machine.
#include "runtime/AdamW.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <vector>

namespace {

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

uint16_t bf16Of(float value) {
  std::vector<float> param{value}, m{0}, v{0}, grad{0};
  std::vector<uint16_t> out(1);
  mt::plan::AdamW config;
  config.set_beta1(0.9);
  config.set_beta2(0.999);
  config.set_eps(1e-8);
  // lr 0 leaves the weight as it is, so the copy is the rounding of `value` itself.
  mt::adamwUpdateScalar(param.data(), m.data(), v.data(), grad.data(), 1, 0.0, 0.0, config, 1,
                        out.data());
  return out[0];
}

} // namespace

int main() {
  mt::plan::AdamW config;
  config.set_beta1(0.9);
  config.set_beta2(0.95);
  config.set_eps(1e-8);
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int failures = 0;
  const int64_t sizes[] = {1, 15, 16, 17, 1000, 300001, 1 << 21};
  for (int64_t size : sizes) {
    std::vector<float> param(size), grad(size);
    for (int64_t i = 0; i < size; ++i) {
      param[i] = normal(random);
      grad[i] = normal(random) * 0.01f;
    }
    std::vector<float> p1 = param, m1(size), v1(size), p2 = param, m2(size), v2(size);
    std::vector<uint16_t> b1(size), b2(size);
    // Clipped: the update's scale against the gradient scaled in place first, as torch's
    // clip_grad_norm_ leaves it.
    const float scale = 0.37f;
    std::vector<float> scaled(size);
    for (int64_t i = 0; i < size; ++i)
      scaled[i] = grad[i] * scale;
    std::vector<float> p3 = param, m3(size), v3(size), p4 = param, m4(size), v4(size);
    std::vector<uint16_t> b3(size), b4(size);
    for (int64_t step = 1; step <= 3; ++step) {
      double squares = mt::adamwUpdate(p1.data(), m1.data(), v1.data(), grad.data(), size, 1e-3,
                                       0.1, config, step, b1.data());
      if (squares != mt::squaredNorm(grad.data(), size) ||
          squares != mt::squaredNormScalar(grad.data(), size)) {
        std::printf("FAIL: %lld elements: the update's squared norm %.17g is not squaredNorm's "
                    "%.17g or the scalar path's %.17g\n",
                    static_cast<long long>(size), squares, mt::squaredNorm(grad.data(), size),
                    mt::squaredNormScalar(grad.data(), size));
        ++failures;
      }
      mt::adamwUpdateScalar(p2.data(), m2.data(), v2.data(), grad.data(), size, 1e-3, 0.1, config,
                            step, b2.data());
      squares = mt::adamwUpdate(p3.data(), m3.data(), v3.data(), grad.data(), size, 1e-3, 0.1,
                                config, step, b3.data(), scale);
      if (squares != mt::squaredNorm(grad.data(), size)) {
        std::printf("FAIL: %lld elements: the scaled update's squared norm %.17g is not the "
                    "given gradient's\n",
                    static_cast<long long>(size), squares);
        ++failures;
      }
      mt::adamwUpdateScalar(p4.data(), m4.data(), v4.data(), scaled.data(), size, 1e-3, 0.1,
                            config, step, b4.data());
    }
    if (!sameBits(p1, p2) || !sameBits(m1, m2) || !sameBits(v1, v2) ||
        std::memcmp(b1.data(), b2.data(), size * 2) != 0) {
      std::printf("FAIL: %lld elements differ from the scalar path\n", static_cast<long long>(size));
      ++failures;
    }
    if (!sameBits(p3, p4) || !sameBits(m3, m4) || !sameBits(v3, v4) ||
        std::memcmp(b3.data(), b4.data(), size * 2) != 0 || sameBits(m3, m1)) {
      std::printf("FAIL: %lld elements: the update scaled by %g is not the update of the "
                  "gradient scaled first\n",
                  static_cast<long long>(size), scale);
      ++failures;
    }
    // Decay toward 1 (a parameter that holds `1 + weight`): the vector paths as the scalar
    // one, and a zero gradient moves each element to (p - 1)(1 - lr wd) + 1.
    std::vector<float> p5 = param, m5(size), v5(size), p6 = param, m6(size), v6(size);
    std::vector<float> p7 = param, m7(size), v7(size), zero(size, 0.0f);
    mt::adamwUpdate(p5.data(), m5.data(), v5.data(), grad.data(), size, 1e-3, 0.1, config, 1,
                    nullptr, 1.0f, 1.0f);
    mt::adamwUpdateScalar(p6.data(), m6.data(), v6.data(), grad.data(), size, 1e-3, 0.1, config, 1,
                          nullptr, 1.0f);
    mt::adamwUpdate(p7.data(), m7.data(), v7.data(), zero.data(), size, 1e-3, 0.1, config, 1,
                    nullptr, 1.0f, 1.0f);
    const float decay = static_cast<float>(1.0 - 1e-3 * 0.1);
    bool centered = true;
    for (int64_t i = 0; i < size; ++i)
      centered = centered && p7[i] == (param[i] - 1.0f) * decay + 1.0f;
    if (!sameBits(p5, p6) || !centered) {
      std::printf("FAIL: %lld elements: decay toward 1 differs from the scalar path or from "
                  "(p - 1)(1 - lr wd) + 1\n",
                  static_cast<long long>(size));
      ++failures;
    }
  }
  std::printf("vector unit %s: bit-identical to the scalar path on %zu sizes, with "
              "squaredNorm's gradient norm (the scalar path's bits), with a clip scale to "
              "scaling the gradient first, and decaying toward a center\n",
              mt::adamwVectorUnit(), sizeof(sizes) / sizeof(sizes[0]));

  // Guarded: a gradient with a NaN in its second chunk of 64Ki elements leaves that chunk's
  // weights and moments as they were, updates the others as unguarded AdamW does, and
  // reports squares that are not finite.
  {
    const int64_t size = 3 << 16;
    std::vector<float> param(size), grad(size);
    for (int64_t i = 0; i < size; ++i) {
      param[i] = normal(random);
      grad[i] = normal(random) * 0.01f;
    }
    grad[(1 << 16) + 5] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> guarded = param, m1(size, 0.5f), v1(size, 0.25f);
    std::vector<float> plain = param, m2(size, 0.5f), v2(size, 0.25f);
    // The bf16 copy starts out holding other values: every element of it, the kept chunk's
    // too, becomes the weights' copy.
    std::vector<uint16_t> slot(size, 0x7fc1);
    double squares = mt::adamwUpdate(guarded.data(), m1.data(), v1.data(), grad.data(), size, 1e-3,
                                     0.1, config, 2, slot.data(), 1.0f, 0.0f, /*guarded=*/true);
    mt::adamwUpdate(plain.data(), m2.data(), v2.data(), grad.data(), size, 1e-3, 0.1, config, 2);
    bool kept = true, updated = true, copied = true;
    for (int64_t i = 0; i < size; ++i) {
      bool bad = i >> 16 == 1;
      if (bad)
        kept = kept && guarded[i] == param[i] && m1[i] == 0.5f && v1[i] == 0.25f;
      else
        updated = updated && guarded[i] == plain[i] && m1[i] == m2[i] && v1[i] == v2[i];
      copied = copied && slot[i] == mt::toBfloat16(guarded[i]);
    }
    if (!kept || !updated || !copied || std::isfinite(squares)) {
      std::printf("FAIL: guarded AdamW: the NaN chunk kept %d, the others updated %d, the copy "
                  "is the weights' %d, squares %g\n",
                  kept, updated, copied, squares);
      ++failures;
    }
    std::printf("guarded: a chunk whose gradient holds a NaN keeps its state and its copy is "
                "of the weights kept, the rest update\n");
  }

  struct Case {
    float value;
    uint16_t expected;
  } cases[] = {{1.0f, 0x3f80},
               {1.00390625f, 0x3f80},  // halfway, already even: down
               {1.01171875f, 0x3f82},  // halfway, odd: up to even
               {1.0078125f + 1e-6f, 0x3f81},
               {-2.5f, 0xc020},
               {std::numeric_limits<float>::infinity(), 0x7f80}};
  for (const Case &c : cases)
    if (bf16Of(c.value) != c.expected) {
      std::printf("FAIL: bf16(%g) = %#x, expected %#x\n", c.value, bf16Of(c.value), c.expected);
      ++failures;
    }
  uint16_t nan = bf16Of(std::numeric_limits<float>::quiet_NaN());
  if ((nan & 0x7f80) != 0x7f80 || (nan & 0x7f) == 0) {
    std::printf("FAIL: NaN became %#x\n", nan);
    ++failures;
  }
  std::printf("bf16 copies round to nearest even, NaN stays NaN\n");

  const int64_t count = 1 << 24;
  std::vector<float> param(count, 1.0f), m(count), v(count), grad(count, 0.01f);
  std::vector<uint16_t> copy(count);
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    auto start = std::chrono::steady_clock::now();
    mt::adamwUpdate(param.data(), m.data(), v.data(), grad.data(), count, 1e-3, 0.1, config,
                    run + 1, copy.data());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }
  std::printf("rate %.2f G params/s with the bf16 copy, %u threads\n", count / best / 1e9,
              std::thread::hardware_concurrency());
  return failures ? 1 : 0;
}
