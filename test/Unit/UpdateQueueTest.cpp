// Unit test of the overlapped optimizer: updates queued from other threads in any order (as
// CUDA host callbacks queue them) give the bits of updates applied in order after the step;
// wait() counts per step and passes an update's error on.
#include "runtime/AdamW.h"
#include "runtime/UpdateQueue.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

struct Parameters {
  std::vector<std::vector<float>> master, m, v, grad;
};

Parameters make(int count, int64_t size) {
  std::mt19937 random(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Parameters p;
  for (int i = 0; i < count; ++i) {
    std::vector<float> w(size), g(size);
    for (int64_t k = 0; k < size; ++k) {
      w[k] = normal(random);
      g[k] = normal(random) * 0.01f;
    }
    p.master.push_back(w);
    p.grad.push_back(g);
    p.m.emplace_back(size, 0.0f);
    p.v.emplace_back(size, 0.0f);
  }
  return p;
}

} // namespace

int main() {
  mt::plan::AdamW config;
  config.set_beta1(0.9);
  config.set_beta2(0.95);
  config.set_eps(1e-8);
  const int count = 24;
  const int64_t size = 100003;
  Parameters inOrder = make(count, size), queued = make(count, size);
  int failures = 0;
  int64_t step = 0;
  auto apply = [&](Parameters &p, int i) {
    mt::adamwUpdate(p.master[i].data(), p.m[i].data(), p.v[i].data(), p.grad[i].data(), size,
                    1e-3, 0.1, config, step);
  };
  mt::UpdateQueue queue([&](int i) { apply(queued, i); });
  for (step = 1; step <= 3; ++step) {
    for (int i = 0; i < count; ++i)
      apply(inOrder, i);
    // Three "driver threads" queue the parameters in reverse, interleaved.
    std::vector<std::thread> callbacks;
    for (int t = 0; t < 3; ++t)
      callbacks.emplace_back([&, t] {
        for (int i = count - 1 - t; i >= 0; i -= 3)
          queue.push(i);
      });
    queue.wait(count);
    for (std::thread &thread : callbacks)
      thread.join();
    for (int i = 0; i < count; ++i)
      if (std::memcmp(inOrder.master[i].data(), queued.master[i].data(), size * 4) != 0 ||
          std::memcmp(inOrder.v[i].data(), queued.v[i].data(), size * 4) != 0) {
        std::printf("FAIL: step %lld parameter %d differs\n", static_cast<long long>(step), i);
        ++failures;
      }
  }
  std::printf("queued updates from 3 threads: the bits of in-order updates over 3 steps\n");

  mt::UpdateQueue failing([](int i) {
    if (i == 5)
      throw std::runtime_error("parameter 5 failed");
  });
  for (int i = 0; i < 8; ++i)
    failing.push(i);
  try {
    failing.wait(8);
    std::printf("FAIL: an update's error was lost\n");
    ++failures;
  } catch (const std::runtime_error &error) {
    std::printf("an update's error reaches wait: %s\n", error.what());
  }

  std::vector<float> values(1000003);
  double expected = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = static_cast<float>(std::sin(0.001 * static_cast<double>(i)));
    expected += static_cast<double>(values[i]) * values[i];
  }
  double got = mt::squaredNorm(values.data(), static_cast<int64_t>(values.size()));
  if (std::fabs(got - expected) > 1e-9 * expected ||
      got != mt::squaredNorm(values.data(), static_cast<int64_t>(values.size()))) {
    std::printf("FAIL: squaredNorm %.17g, expected %.17g\n", got, expected);
    ++failures;
  }
  std::printf("squaredNorm: the double sum, the same bits every call\n");
  return failures == 0 ? 0 : 1;
}
