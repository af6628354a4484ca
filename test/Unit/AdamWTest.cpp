// Unit test of the CPU AdamW: the vector path against the scalar reference (bit for bit,
// every size and thread split), on whole and split masters, the halves' rounding, and the
// update rate on this machine.
#include "runtime/AdamW.h"
#include "runtime/MasterHalves.h"

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

/// Masters split into halves (MasterHalves.h), and joined back.
struct Halves {
  std::vector<uint16_t> high, low;
  explicit Halves(const std::vector<float> &masters) : high(masters.size()), low(masters.size()) {
    mt::splitMasters(masters.data(), masters.size(), high.data(), low.data());
  }
  mt::MasterWeights weights() { return mt::MasterWeights(high.data(), low.data()); }
  std::vector<float> joined() const {
    std::vector<float> masters(high.size());
    mt::joinMasters(high.data(), low.data(), high.size(), masters.data());
    return masters;
  }
  bool operator==(const Halves &other) const { return high == other.high && low == other.low; }
};

uint32_t bitsOf(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

float floatOf(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
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

  // Halves: every master comes back bit for bit, a NaN quieted (a quiet NaN bit for bit); the
  // high half is the master rounded to nearest, ties away from zero.
  {
    std::uniform_int_distribution<uint32_t> anyBits;
    int64_t wrong = 0;
    for (int i = 0; i < 1000000; ++i) {
      uint32_t bits = anyBits(random);
      uint16_t high, low;
      mt::splitMaster(floatOf(bits), high, low);
      float back = mt::joinHalves(high, low);
      bool nan = std::isnan(floatOf(bits));
      wrong +=
          nan ? bitsOf(back) != (bits | 0x00400000u) || !std::isnan(floatOf(uint32_t{high} << 16))
              : bitsOf(back) != bits;
    }
    struct Case {
      float value;
      uint16_t high;
    } cases[] = {{1.0f, 0x3f80},
                 {1.00390625f, 0x3f81},  // halfway: away from zero
                 {-1.00390625f, 0xbf81}, // halfway, negative: away from zero
                 {1.0078125f + 1e-6f, 0x3f81},
                 {1.0f + 1e-3f, 0x3f80},
                 {-2.5f, 0xc020},
                 {std::numeric_limits<float>::max(), 0x7f80}, // rounds up to infinity
                 {std::numeric_limits<float>::infinity(), 0x7f80},
                 {std::numeric_limits<float>::denorm_min(), 0x0000}};
    for (const Case &c : cases) {
      uint16_t high, low;
      mt::splitMaster(c.value, high, low);
      if (high != c.high || bitsOf(mt::joinHalves(high, low)) != bitsOf(c.value)) {
        std::printf("FAIL: halves of %g: high %#x, expected %#x, joined %g\n", c.value, high,
                    c.high, mt::joinHalves(high, low));
        ++failures;
      }
    }
    if (wrong) {
      std::printf("FAIL: %lld of a million random masters did not come back from their "
                  "halves\n",
                  static_cast<long long>(wrong));
      ++failures;
    }
    std::printf("halves: a million random masters back bit for bit, a NaN quieted, the high "
                "half rounded to nearest (ties away)\n");
  }

  const int64_t sizes[] = {1, 15, 16, 17, 1000, 300001, 1 << 21};
  for (int64_t size : sizes) {
    std::vector<float> param(size), grad(size);
    for (int64_t i = 0; i < size; ++i) {
      param[i] = normal(random);
      grad[i] = normal(random) * 0.01f;
    }
    std::vector<float> p1 = param, m1(size), v1(size), p2 = param, m2(size), v2(size);
    // Split masters, by the vector path and the scalar one: the same updates as whole ones.
    Halves h1(param), h2(param);
    std::vector<float> mh1(size), vh1(size), mh2(size), vh2(size);
    // Clipped: the update's scale against the gradient scaled in place first, as torch's
    // clip_grad_norm_ leaves it.
    const float scale = 0.37f;
    std::vector<float> scaled(size);
    for (int64_t i = 0; i < size; ++i)
      scaled[i] = grad[i] * scale;
    std::vector<float> p3 = param, m3(size), v3(size), p4 = param, m4(size), v4(size);
    for (int64_t step = 1; step <= 3; ++step) {
      double squares = mt::adamwUpdate(p1.data(), m1.data(), v1.data(), grad.data(), size, 1e-3,
                                       0.1, config, step);
      if (squares != mt::squaredNorm(grad.data(), size) ||
          squares != mt::squaredNormScalar(grad.data(), size)) {
        std::printf("FAIL: %lld elements: the update's squared norm %.17g is not squaredNorm's "
                    "%.17g or the scalar path's %.17g\n",
                    static_cast<long long>(size), squares, mt::squaredNorm(grad.data(), size),
                    mt::squaredNormScalar(grad.data(), size));
        ++failures;
      }
      mt::adamwUpdateScalar(p2.data(), m2.data(), v2.data(), grad.data(), size, 1e-3, 0.1, config,
                            step);
      mt::adamwUpdate(h1.weights(), mh1.data(), vh1.data(), grad.data(), size, 1e-3, 0.1, config,
                      step);
      mt::adamwUpdateScalar(h2.weights(), mh2.data(), vh2.data(), grad.data(), size, 1e-3, 0.1,
                            config, step);
      squares = mt::adamwUpdate(p3.data(), m3.data(), v3.data(), grad.data(), size, 1e-3, 0.1,
                                config, step, scale);
      if (squares != mt::squaredNorm(grad.data(), size)) {
        std::printf("FAIL: %lld elements: the scaled update's squared norm %.17g is not the "
                    "given gradient's\n",
                    static_cast<long long>(size), squares);
        ++failures;
      }
      mt::adamwUpdateScalar(p4.data(), m4.data(), v4.data(), scaled.data(), size, 1e-3, 0.1, config,
                            step);
    }
    if (!sameBits(p1, p2) || !sameBits(m1, m2) || !sameBits(v1, v2)) {
      std::printf("FAIL: %lld elements differ from the scalar path\n", static_cast<long long>(size));
      ++failures;
    }
    if (!(h1 == h2) || !(h1 == Halves(p1)) || !sameBits(h1.joined(), p1) || !sameBits(mh1, m1) ||
        !sameBits(vh1, v1) || !sameBits(mh2, m1) || !sameBits(vh2, v1)) {
      std::printf("FAIL: %lld elements: split masters' updates are not whole masters'\n",
                  static_cast<long long>(size));
      ++failures;
    }
    if (!sameBits(p3, p4) || !sameBits(m3, m4) || !sameBits(v3, v4) || sameBits(m3, m1)) {
      std::printf("FAIL: %lld elements: the update scaled by %g is not the update of the "
                  "gradient scaled first\n",
                  static_cast<long long>(size), scale);
      ++failures;
    }
    // Decay toward 1 (a parameter that holds `1 + weight`): the vector paths as the scalar
    // one, and a zero gradient moves each element to (p - 1)(1 - lr wd) + 1.
    std::vector<float> p5 = param, m5(size), v5(size), p6 = param, m6(size), v6(size);
    std::vector<float> p7 = param, m7(size), v7(size), zero(size, 0.0f);
    mt::adamwUpdate(p5.data(), m5.data(), v5.data(), grad.data(), size, 1e-3, 0.1, config, 1, 1.0f,
                    1.0f);
    mt::adamwUpdateScalar(p6.data(), m6.data(), v6.data(), grad.data(), size, 1e-3, 0.1, config, 1,
                          1.0f);
    mt::adamwUpdate(p7.data(), m7.data(), v7.data(), zero.data(), size, 1e-3, 0.1, config, 1, 1.0f,
                    1.0f);
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
  std::printf("vector unit %s: bit-identical to the scalar path on %zu sizes, on whole and "
              "split masters alike, with squaredNorm's gradient norm (the scalar path's bits), "
              "with a clip scale to scaling the gradient first, and decaying toward a center\n",
              mt::adamwVectorUnit(), sizeof(sizes) / sizeof(sizes[0]));

  // Unguarded, a NaN and an infinity in the gradient make NaN masters: split as the scalar
  // path splits them (a NaN high half stays a quiet NaN), on every vector unit. NaN masters
  // whose low halves pass 0x7fff (read back as a difference they would lose their payload)
  // are joined as the scalar path joins them: the update's NaN keeps their bits.
  {
    const int64_t size = 1000;
    std::vector<float> param(size), grad(size);
    for (int64_t i = 0; i < size; ++i) {
      param[i] = normal(random);
      grad[i] = normal(random) * 0.01f;
    }
    grad[3] = std::numeric_limits<float>::quiet_NaN();
    grad[517] = -std::numeric_limits<float>::infinity();
    const uint32_t nanBits[] = {0x7fc0c000u, 0xffc1ffffu};
    param[100] = floatOf(nanBits[0]);
    param[101] = floatOf(nanBits[1]);
    Halves vector(param), scalar(param);
    std::vector<float> m1(size), v1(size), m2(size), v2(size);
    mt::adamwUpdate(vector.weights(), m1.data(), v1.data(), grad.data(), size, 1e-3, 0.1, config,
                    1);
    mt::adamwUpdateScalar(scalar.weights(), m2.data(), v2.data(), grad.data(), size, 1e-3, 0.1,
                          config, 1);
    bool quiet = (vector.high[3] & 0x7fc0) == 0x7fc0 && (vector.high[517] & 0x7fc0) == 0x7fc0;
    std::vector<float> joined = vector.joined();
    bool kept = bitsOf(joined[100]) == nanBits[0] && bitsOf(joined[101]) == nanBits[1];
    if (!(vector == scalar) || !quiet || !kept) {
      std::printf("FAIL: NaN masters split or joined otherwise than the scalar path (quiet NaNs "
                  "%d, NaN masters' bits kept %d)\n",
                  quiet, kept);
      ++failures;
    }
    std::printf("NaN masters: split and joined as the scalar path does, a quiet NaN's bits "
                "kept\n");
  }

  // Guarded: a gradient with a NaN in its second chunk of 64Ki elements leaves that chunk's
  // weights (both halves of split ones) and moments as they were, updates the others as
  // unguarded AdamW does, and reports squares that are not finite.
  {
    const int64_t size = 3 << 16;
    std::vector<float> param(size), grad(size);
    for (int64_t i = 0; i < size; ++i) {
      param[i] = normal(random);
      grad[i] = normal(random) * 0.01f;
    }
    grad[(1 << 16) + 5] = std::numeric_limits<float>::quiet_NaN();
    Halves guarded(param), before(param);
    std::vector<float> m1(size, 0.5f), v1(size, 0.25f);
    std::vector<float> plain = param, m2(size, 0.5f), v2(size, 0.25f);
    double squares = mt::adamwUpdate(guarded.weights(), m1.data(), v1.data(), grad.data(), size,
                                     1e-3, 0.1, config, 2, 1.0f, 0.0f, /*guarded=*/true);
    mt::adamwUpdate(plain.data(), m2.data(), v2.data(), grad.data(), size, 1e-3, 0.1, config, 2);
    std::vector<float> joined = guarded.joined();
    bool kept = true, updated = true;
    for (int64_t i = 0; i < size; ++i) {
      bool bad = i >> 16 == 1;
      if (bad)
        kept = kept && guarded.high[i] == before.high[i] && guarded.low[i] == before.low[i] &&
               m1[i] == 0.5f && v1[i] == 0.25f;
      else
        updated =
            updated && bitsOf(joined[i]) == bitsOf(plain[i]) && m1[i] == m2[i] && v1[i] == v2[i];
    }
    if (!kept || !updated || std::isfinite(squares)) {
      std::printf("FAIL: guarded AdamW: the NaN chunk kept %d, the others updated %d, squares "
                  "%g\n",
                  kept, updated, squares);
      ++failures;
    }
    std::printf("guarded: a chunk whose gradient holds a NaN keeps its state, the rest "
                "update\n");
  }

  const int64_t count = 1 << 24;
  std::vector<float> m(count), v(count), grad(count, 0.01f);
  Halves masters(std::vector<float>(count, 1.0f));
  double best = 1e30;
  for (int run = 0; run < 3; ++run) {
    auto start = std::chrono::steady_clock::now();
    mt::adamwUpdate(masters.weights(), m.data(), v.data(), grad.data(), count, 1e-3, 0.1, config,
                    run + 1);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                              .count());
  }
  std::printf("rate %.2f G params/s on split masters, %u threads\n", count / best / 1e9,
              std::thread::hardware_concurrency());
  return failures ? 1 : 0;
}
