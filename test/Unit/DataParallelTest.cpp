// Unit test of the overlapped data-parallel update: ranks as threads, each handing its
// gradients over in its own order, with the collectives run in sequence by an update queue,
// end with the bits of DataParallelRank::step (collectives after the whole backward).
#include "runtime/UpdateQueue.h"
#include "runtime/parallel/DataParallel.h"
#include "runtime/parallel/ThreadGroup.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 3, kSteps = 3;

/// Parameters of uneven sizes: one smaller than the ranks, some not divisible by them.
mt::plan::Plan makePlan() {
  mt::plan::Plan plan;
  for (int64_t size : {1001, 2, 4096, 7, 333}) {
    mt::plan::Parameter &parameter = *plan.add_parameters();
    parameter.set_name("w" + std::to_string(plan.parameters_size()));
    parameter.mutable_type()->add_shape(size);
  }
  mt::plan::AdamW &adamw = *plan.mutable_optimizer();
  adamw.set_beta1(0.9);
  adamw.set_beta2(0.95);
  adamw.set_eps(1e-8);
  adamw.set_weight_decay(0.1);
  return plan;
}

/// Rank r's gradient of parameter p at step s: fixed random values.
std::vector<float> gradientOf(int r, int p, int64_t s, int64_t size) {
  std::mt19937 random(static_cast<uint32_t>(1000 * r + 100 * p + s));
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> g(size);
  for (float &x : g)
    x = normal(random);
  return g;
}

struct Rank {
  std::vector<std::vector<float>> weights, gradients;
  std::vector<float *> pointers() {
    std::vector<float *> out;
    for (std::vector<float> &w : weights)
      out.push_back(w.data());
    return out;
  }
};

std::vector<Rank> startRanks(const mt::plan::Plan &plan) {
  std::vector<Rank> ranks(kRanks);
  for (Rank &rank : ranks)
    for (const mt::plan::Parameter &parameter : plan.parameters()) {
      std::vector<float> w(parameter.type().shape(0));
      for (size_t i = 0; i < w.size(); ++i)
        w[i] = std::sin(0.01f * static_cast<float>(i + w.size()));
      rank.weights.push_back(w);
      rank.gradients.emplace_back(w.size());
    }
  return ranks;
}

} // namespace

int main() {
  mt::plan::Plan plan = makePlan();
  int count = plan.parameters_size();
  std::regex noDecay("w1");
  auto lrOf = [](int64_t step) { return 1e-2 / static_cast<double>(step); };
  auto decayOf = [&](int p) {
    return std::regex_search(plan.parameters(p).name(), noDecay) ? 0.0 : 0.1;
  };

  // The reference: every rank's whole backward, then its collectives and updates.
  std::vector<Rank> batched = startRanks(plan);
  std::vector<double> batchedLoss(kSteps + 1), batchedNorm(kSteps + 1);
  {
    mt::ThreadGroup group(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        int64_t at = 0;
        auto backward = [&](const mt::DataParallelRank::Inputs &, std::vector<float *> &out) {
          for (int p = 0; p < count; ++p) {
            batched[r].gradients[p] = gradientOf(r, p, at, batched[r].weights[p].size());
            out[p] = batched[r].gradients[p].data();
          }
          return 1.0 + r + at;
        };
        mt::DataParallelRank rank(plan, group.member(r), batched[r].pointers(), backward);
        for (at = 1; at <= kSteps; ++at) {
          mt::DataParallelRank::Result result = rank.step({}, at, lrOf(at), noDecay);
          if (r == 0) {
            batchedLoss[at] = result.loss;
            batchedNorm[at] = result.gradNorm;
          }
        }
      });
    for (std::thread &thread : threads)
      thread.join();
  }

  // Overlapped: each rank hands its gradients over in an order of its own (a shuffle per rank
  // and step, as landing times differ), from another thread, while the next step waits only
  // for the parameter it refills; the queue runs them in one sequence (reverse order, then the
  // step's end) on every rank.
  std::vector<Rank> overlapped = startRanks(plan);
  std::vector<double> overlappedLoss(kSteps + 1), overlappedNorm(kSteps + 1);
  {
    mt::ThreadGroup group(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        mt::DataParallelRank rank(plan, group.member(r), overlapped[r].pointers(), {});
        std::vector<double> squares[2] = {std::vector<double>(count), std::vector<double>(count)};
        double losses[2] = {0, 0};
        // The shards in reverse (as a backward hands them over), the gathers in order (as a
        // forward reads), then the step's end.
        std::vector<int> need(2 * count + 1);
        for (int p = 0; p < count; ++p) {
          need[p] = count - 1 - p;
          need[count + p] = count + p;
        }
        need[2 * count] = 2 * count;
        mt::UpdateQueue queue(
            [&](int p, int64_t at) {
              if (p == 2 * count) {
                double sum = 0;
                for (double x : squares[at & 1])
                  sum += x;
                mt::DataParallelRank::Result result = rank.finishStep(losses[at & 1], sum);
                if (r == 0) {
                  overlappedLoss[at] = result.loss;
                  overlappedNorm[at] = result.gradNorm;
                }
              } else if (p >= count) {
                rank.gather(p - count);
              } else {
                squares[at & 1][p] = rank.updateShard(p, overlapped[r].gradients[p].data(), at,
                                                      lrOf(at), decayOf(p));
              }
            },
            need, /*inSequence=*/true);
        std::mt19937 random(77 + r);
        for (int64_t at = 1; at <= kSteps; ++at) {
          std::vector<int> order(count);
          for (int p = 0; p < count; ++p)
            order[p] = p;
          std::shuffle(order.begin(), order.end(), random);
          for (int p : order) { // the "forward" reads p once its last gather is done
            queue.waitFor(count + p);
            overlapped[r].gradients[p] = gradientOf(r, p, at, overlapped[r].weights[p].size());
          }
          // Apart in time, so that the worker finds each step's updates partly queued.
          std::thread landing([&, order, at] {
            for (int p : order) {
              std::this_thread::sleep_for(std::chrono::milliseconds(2));
              queue.push(p, at);
            }
          });
          landing.join();
          losses[at & 1] = 1.0 + r + at;
          for (int p = count; p <= 2 * count; ++p)
            queue.push(p, at);
        }
        queue.waitStep(kSteps, 2 * count + 1);
      });
    for (std::thread &thread : threads)
      thread.join();
  }

  int failures = 0;
  for (int r = 0; r < kRanks; ++r)
    for (int p = 0; p < count; ++p)
      if (overlapped[r].weights[p] != batched[r].weights[p] ||
          overlapped[r].weights[p] != batched[0].weights[p]) {
        std::printf("FAIL: rank %d parameter %d differs from the batched update\n", r, p);
        ++failures;
      }
  for (int64_t at = 1; at <= kSteps; ++at)
    if (overlappedLoss[at] != batchedLoss[at] || overlappedNorm[at] != batchedNorm[at]) {
      std::printf("FAIL: step %lld loss %.17g norm %.17g, batched %.17g %.17g\n",
                  static_cast<long long>(at), overlappedLoss[at], overlappedNorm[at],
                  batchedLoss[at], batchedNorm[at]);
      ++failures;
    }
  std::printf("%d ranks, %d steps, gradients handed over in each rank's own order: the weights "
              "of the batched update, bit for bit, on every rank\n",
              kRanks, kSteps);
  std::printf("mean loss %.6f and gradient norm %.6f at the last step, as batched\n",
              overlappedLoss[kSteps], overlappedNorm[kSteps]);
  return failures == 0 ? 0 : 1;
}
