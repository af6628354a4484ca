// Unit test of the overlapped data-parallel update as over NCCL: ranks as threads whose
// "device" averages the gradients and gathers the weights, each rank handing its gradients
// to OverlappedUpdates in its own order, end with the bits of DataParallelRank::step
// (collectives on the host after the whole backward), with and without clipping.
#include "runtime/OverlappedUpdates.h"
#include "runtime/parallel/DataParallel.h"
#include "runtime/parallel/ThreadGroup.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
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

/// Rank r's gradient of parameter p at step s from the weights the step read: fixed random
/// values and half the weights, so that stale weights change it.
std::vector<float> gradientOf(int r, int p, int64_t s, const float *weights, int64_t size) {
  std::mt19937 random(static_cast<uint32_t>(1000 * r + 100 * p + s));
  std::normal_distribution<float> normal(0.0f, 0.1f);
  std::vector<float> g(size);
  for (int64_t i = 0; i < size; ++i)
    g[i] = normal(random) + 0.5f * weights[i];
  return g;
}

/// A rank's host state (the moments of its shards) and last gradients.
struct Rank {
  std::unique_ptr<mt::HostState> state;
  std::vector<std::vector<float>> gradients, final;
  std::vector<float> weights(int p) const {
    const mt::ParameterState &parameter = state->parameters[p];
    return {parameter.master, parameter.master + parameter.count};
  }
};

/// The starting weights are sin(0.01 (i + count)) at element i.
std::vector<Rank> startRanks(const mt::plan::Plan &plan, mt::HostState::Masters masters) {
  std::vector<Rank> ranks(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    ranks[r].state = std::make_unique<mt::HostState>(plan, false, r, kRanks, masters);
    for (mt::ParameterState &parameter : ranks[r].state->parameters) {
      for (int64_t i = parameter.held.begin; i < parameter.held.end; ++i)
        parameter.master[i - parameter.held.begin] =
            std::sin(0.01f * static_cast<float>(i + parameter.count));
      ranks[r].gradients.emplace_back(parameter.count);
    }
  }
  return ranks;
}

/// Trains the plan's parameters kSteps steps on kRanks ranks both ways, batched and
/// overlapped; returns the failures.
int compareOverlapped(const mt::plan::Plan &plan) {
  int count = plan.parameters_size();
  auto lrOf = [](int64_t step) { return 1e-2 / static_cast<double>(step); };
  // w1 without decay, the last parameter decaying toward 1 (one that holds `1 + weight`).
  mt::plan::AdamW adamw = plan.optimizer();
  adamw.set_no_decay("w1");
  std::vector<float> centers(count, 0.0f);
  centers.back() = 1.0f;
  std::vector<mt::WeightDecay> decays = mt::weightDecays(plan, adamw, centers);
  auto decayOf = [&](int p) { return decays[p]; };

  // The reference: every rank's whole backward, then its collectives and updates.
  std::vector<Rank> batched = startRanks(plan, mt::HostState::Masters::Replicated);
  std::vector<double> batchedLoss(kSteps + 1), batchedNorm(kSteps + 1);
  {
    mt::ThreadGroup group(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        int64_t at = 0;
        auto backward = [&](const mt::DataParallelRank::Inputs &, std::vector<float *> &out) {
          for (int p = 0; p < count; ++p) {
            const mt::ParameterState &parameter = batched[r].state->parameters[p];
            batched[r].gradients[p] = gradientOf(r, p, at, parameter.master, parameter.count);
            out[p] = batched[r].gradients[p].data();
          }
          return 1.0 + r + at;
        };
        mt::DataParallelRank rank(*batched[r].state, group.member(r), backward);
        for (at = 1; at <= kSteps; ++at) {
          mt::DataParallelRank::Result result = rank.step({}, at, lrOf(at), decays);
          if (r == 0) {
            batchedLoss[at] = result.loss;
            batchedNorm[at] = result.gradNorm;
          }
        }
      });
    for (std::thread &thread : threads)
      thread.join();
  }

  // As mt-run over NCCL: the "device" averages each gradient before its offload, in the
  // plan's order (the same on every rank); the gradients reach OverlappedUpdates in an order
  // of each rank's own (landing times differ), from another thread; its worker runs the shard
  // updates, which are no collectives, in the order the next step reads the weights, then the
  // step's end (when clipping, the measures first, then the norm over the ranks); the next
  // step's upload of each weight waits for its update, then the "device" gathers it. The
  // device's collectives and the host's have groups of their own, as NCCL communicators. Each
  // rank's host state holds its shards alone; its "device" holds the full weights.
  std::vector<Rank> overlapped = startRanks(plan, mt::HostState::Masters::Sharded);
  std::vector<double> overlappedLoss(kSteps + 1), overlappedNorm(kSteps + 1);
  std::atomic<int> rankErrors{0};
  {
    mt::ThreadGroup device(kRanks), host(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r)
      threads.emplace_back([&, r] {
        try {
          mt::DataParallelRank rank(*overlapped[r].state, host.member(r), {},
                                    mt::DataParallelRank::Collectives::OnDevice);
          double losses[2] = {0, 0};
          std::vector<int> readOrder(count);
          for (int p = 0; p < count; ++p)
            readOrder[p] = p;
          mt::OverlappedUpdates updates(
              rank.overlappedOptimizer(
                  [&](int p) { return overlapped[r].gradients[p].data(); }, lrOf, decayOf, losses),
              readOrder, plan.optimizer().grad_clip());
          // A failing rank stops the others' collectives before its update worker is joined,
          // which may wait in one.
          struct StopOnFailure {
            mt::ThreadGroup &device, &host;
            ~StopOnFailure() {
              if (std::uncaught_exceptions()) {
                device.abort();
                host.abort();
              }
            }
          } stopOnFailure{device, host};
          std::vector<std::vector<float>> onDevice(count);
          std::mt19937 random(77 + r);
          for (int64_t at = 1; at <= kSteps; ++at) {
            for (int p = 0; p < count; ++p) { // the forward's uploads: the shard, then a gather
              updates.waitFor(p);
              const mt::ParameterState &parameter = overlapped[r].state->parameters[p];
              onDevice[p].resize(parameter.count);
              std::copy(parameter.master, parameter.master + parameter.held.size(),
                        onDevice[p].begin() + parameter.held.begin);
              device.member(r).allGather(onDevice[p].data(), parameter.count);
            }
            for (int p = count - 1; p >= 0; --p) { // the backward's offloads
              std::vector<float> &gradient = overlapped[r].gradients[p];
              gradient = gradientOf(r, p, at, onDevice[p].data(), gradient.size());
              device.member(r).reduceScatterMean(gradient.data(),
                                                 static_cast<int64_t>(gradient.size()));
            }
            std::vector<int> order = readOrder;
            std::shuffle(order.begin(), order.end(), random);
            // Apart in time, so that the worker finds each step's updates partly queued.
            std::thread landing([&, order, at] {
              for (int p : order) {
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
                updates.landed(p, at);
              }
            });
            landing.join();
            losses[at & 1] = 1.0 + r + at;
            updates.backwardDone(at);
            if (at > 1) {
              double norm = updates.finished(at - 1);
              if (r == 0) {
                overlappedNorm[at - 1] = norm;
                overlappedLoss[at - 1] = losses[(at - 1) & 1]; // the mean over the ranks
              }
            }
          }
          double norm = updates.finished(kSteps);
          if (r == 0) {
            overlappedNorm[kSteps] = norm;
            overlappedLoss[kSteps] = losses[kSteps & 1];
          }
          for (int p = 0; p < count; ++p) // the final weights: every rank's shards
            overlapped[r].final.push_back(rank.gathered(p));
        } catch (const std::exception &error) {
          // A rank that fails stops the others' collectives, so that the test reports.
          std::printf("FAIL: rank %d: %s\n", r, error.what());
          ++rankErrors;
          device.abort();
          host.abort();
        }
      });
    for (std::thread &thread : threads)
      thread.join();
  }

  int failures = rankErrors;
  if (failures)
    return failures;
  for (int r = 0; r < kRanks; ++r)
    for (int p = 0; p < count; ++p)
      if (overlapped[r].final[p] != batched[r].weights(p) ||
          overlapped[r].final[p] != batched[0].weights(p)) {
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
  double clip = plan.optimizer().grad_clip();
  bool clipped = false;
  for (int64_t at = 1; at <= kSteps; ++at)
    clipped |= clip > 0 && batchedNorm[at] > clip;
  if (clip > 0 && !clipped) {
    std::printf("FAIL: no step's norm is over the clip %g: clipping is not tested\n", clip);
    ++failures;
  }
  std::printf("%d ranks, %d steps, collectives on the device, gradients handed over in each "
              "rank's own order, %s: the weights of the batched update, bit for bit, on "
              "every rank\n",
              kRanks, kSteps, clip > 0 ? "clipped" : "unclipped");
  std::printf("mean loss %.6f and gradient norm %.6f at the last step, as batched\n",
              overlappedLoss[kSteps], overlappedNorm[kSteps]);
  return failures;
}

} // namespace

int main() {
  mt::plan::Plan plan = makePlan();
  int count = plan.parameters_size();
  int failures = compareOverlapped(plan);
  // The gradients' norm is about 27 at every step.
  plan.mutable_optimizer()->set_grad_clip(5.0);
  failures += compareOverlapped(plan);
  plan.mutable_optimizer()->set_grad_clip(0);

  // A rank's sharded host state draws the random weights every rank draws, keeping its shard.
  mt::HostState whole(plan, true);
  whole.initializeRandomly(7);
  int64_t shardedBytes = 0;
  for (int r = 0; r < kRanks; ++r) {
    mt::HostState shard(plan, true, r, kRanks, mt::HostState::Masters::Sharded);
    shard.initializeRandomly(7);
    shardedBytes += shard.bytes();
    for (int p = 0; p < count; ++p) {
      std::vector<float> mine = shard.parameters[p].masters(), all = whole.parameters[p].masters();
      if (!std::equal(mine.begin(), mine.end(), all.begin() + shard.parameters[p].held.begin)) {
        std::printf("FAIL: rank %d's shard of parameter %d starts from other weights\n", r, p);
        ++failures;
      }
    }
  }
  if (shardedBytes != whole.bytes()) {
    std::printf("FAIL: the ranks' sharded host states hold %lld bytes, one rank's %lld\n",
                static_cast<long long>(shardedBytes), static_cast<long long>(whole.bytes()));
    ++failures;
  }
  std::printf("sharded host states: every rank's shard of the random weights; %lld bytes on %d "
              "ranks, %lld on one\n",
              static_cast<long long>(shardedBytes), kRanks, static_cast<long long>(whole.bytes()));
  return failures == 0 ? 0 : 1;
}
