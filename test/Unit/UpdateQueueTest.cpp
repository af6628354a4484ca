// Unit test of the overlapped optimizer: updates queued from other threads in any order (as
// CUDA host callbacks queue them, and two steps overlapping) give the bits of updates applied
// in order after each step; queued updates run in step and need order; errors reach the waits.
#include "runtime/AdamW.h"
#include "runtime/UpdateQueue.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
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
  // Parameters are read in the order 0..count-1 (`need` is the identity) and handed over in
  // reverse, as a backward does. The "forward" of the next step waits for each parameter
  // just before reading it, without waiting for the whole step: updates of two steps overlap.
  std::vector<int> need(count);
  for (int i = 0; i < count; ++i)
    need[i] = i;
  mt::UpdateQueue queue([&](int i, int64_t at) {
    mt::adamwUpdate(queued.master[i].data(), queued.m[i].data(), queued.v[i].data(),
                    queued.grad[i].data(), size, 1e-3, 0.1, config, at);
  }, need);
  for (step = 1; step <= 3; ++step) {
    for (int i = 0; i < count; ++i)
      apply(inOrder, i);
    for (int i = 0; i < count; ++i)
      queue.waitFor(i);
    // Three "driver threads" queue the parameters in reverse, interleaved.
    std::vector<std::thread> callbacks;
    for (int t = 0; t < 3; ++t)
      callbacks.emplace_back([&, t, at = step] {
        for (int i = count - 1 - t; i >= 0; i -= 3)
          queue.push(i, at);
      });
    for (std::thread &thread : callbacks)
      thread.join();
  }
  queue.waitStep(3, count);
  for (int i = 0; i < count; ++i)
    if (std::memcmp(inOrder.master[i].data(), queued.master[i].data(), size * 4) != 0 ||
        std::memcmp(inOrder.v[i].data(), queued.v[i].data(), size * 4) != 0) {
      std::printf("FAIL: parameter %d differs after 3 overlapped steps\n", i);
      ++failures;
    }
  std::printf("queued updates from 3 threads, steps overlapped: the bits of in-order updates\n");

  // While the worker is busy, queued updates line up oldest step first, then by need.
  {
    std::promise<void> started, release;
    std::shared_future<void> released = release.get_future().share();
    std::vector<std::pair<int64_t, int>> ran;
    mt::UpdateQueue ordered([&](int i, int64_t at) {
      if (ran.empty()) { // the first holds the worker until the rest are queued
        started.set_value();
        released.wait();
      }
      ran.emplace_back(at, i);
    }, {3, 0, 2, 1});
    ordered.push(0, 1);
    started.get_future().wait();
    for (auto [i, at] : {std::pair<int, int64_t>{2, 2}, {0, 2}, {3, 1}, {1, 1}, {2, 1}})
      ordered.push(i, at);
    release.set_value();
    ordered.waitStep(1, 4);
    ordered.waitStep(2, 2);
    std::vector<std::pair<int64_t, int>> expected = {{1, 0}, {1, 1}, {1, 3}, {1, 2}, {2, 2}, {2, 0}};
    if (ran != expected) {
      std::printf("FAIL: updates ran in the order");
      for (auto [at, i] : ran)
        std::printf(" (step %lld, parameter %d)", static_cast<long long>(at), i);
      std::printf("\n");
      ++failures;
    }
  }
  std::printf("queued updates run oldest step first, then in the order the step reads them\n");

  mt::UpdateQueue failing([](int i, int64_t) {
    if (i == 5)
      throw std::runtime_error("parameter 5 failed");
  }, std::vector<int>(8, 0));
  for (int i = 0; i < 8; ++i)
    failing.push(i, 1);
  for (int round = 0; round < 2; ++round)
    try {
      if (round == 0)
        failing.waitStep(1, 8);
      else
        failing.waitFor(5);
      std::printf("FAIL: an update's error was lost\n");
      ++failures;
    } catch (const std::runtime_error &error) {
      std::printf("an update's error reaches %s: %s\n", round == 0 ? "waitStep" : "waitFor",
                  error.what());
      failing.push(5, 2); // fails again, for waitFor
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
