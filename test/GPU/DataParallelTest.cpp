// GPU test of the executor's data parallelism: two ranks (threads on this one GPU, each with
// its host state and executor) upload and offload only their shards, with the collectives
// around them relayed through host memory (NCCL refuses two ranks on one GPU). They must end
// with the bits of the same ranks with the collectives on the host (full offloads and
// uploads), train like one rank with twice the batch, and unlike two ranks that train alone;
// updating each shard as its gradient lands (OverlappedUpdates, as mt-run over NCCL) must give
// the bits of updates after the backward, clipped or not.
#include "runtime/parallel/DataParallel.h"
#include "runtime/AdamW.h"
#include "runtime/HostState.h"
#include "runtime/MasterHalves.h"
#include "runtime/OverlappedUpdates.h"
#include "runtime/PlanLoader.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceCollectives.h"
#include "runtime/cuda/Executor.h"
#include "runtime/parallel/ThreadGroup.h"
#include "runtime/train/TokenData.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 2, kSteps = 8;
constexpr double kTolerance = 1e-2; // relative, of each step's loss

/// The device's collectives through the host: each waits for its stream, brings the tensor
/// over, runs the thread group's collective on it and sends this rank's result back.
class HostRelay : public mt::cuda::DeviceCollectives {
public:
  explicit HostRelay(mt::Communicator &group) : group(group) {}
  int rank() const override { return group.rank(); }
  int size() const override { return group.size(); }

  void reduceMean(float *gradient, int64_t count, cudaStream_t stream) override {
    std::vector<float> host(count);
    MT_CUDA_CHECK(cudaMemcpyAsync(host.data(), gradient, count * sizeof(float),
                                  cudaMemcpyDeviceToHost, stream));
    MT_CUDA_CHECK(cudaStreamSynchronize(stream));
    group.reduceScatterMean(host.data(), count);
    mt::Shard shard = mt::shardOf(count, rank(), size());
    MT_CUDA_CHECK(cudaMemcpyAsync(gradient + shard.begin, host.data() + shard.begin,
                                  shard.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    MT_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  void gather(void *weights, int64_t count, int width, cudaStream_t stream) override {
    std::vector<uint16_t> bf16(width == 2 ? count : 0);
    std::vector<float> values(count);
    void *host = width == 2 ? static_cast<void *>(bf16.data()) : values.data();
    MT_CUDA_CHECK(cudaMemcpyAsync(host, weights, count * width, cudaMemcpyDeviceToHost, stream));
    MT_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (size_t i = 0; i < bf16.size(); ++i) { // bf16 widens to fp32 and back exactly
      uint32_t bits = static_cast<uint32_t>(bf16[i]) << 16;
      std::memcpy(&values[i], &bits, 4);
    }
    group.allGather(values.data(), count);
    for (size_t i = 0; i < bf16.size(); ++i) {
      uint32_t bits;
      std::memcpy(&bits, &values[i], 4);
      bf16[i] = mt::highHalf(bits); // exact: each value came from a bf16
    }
    MT_CUDA_CHECK(cudaMemcpyAsync(weights, host, count * width, cudaMemcpyHostToDevice, stream));
    MT_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

private:
  mt::Communicator &group;
};

struct Trained {
  std::vector<double> losses;            // per step, the mean over the ranks
  std::vector<double> norms;             // per step, the gradient norm before clipping
  std::vector<std::vector<float>> masters; // the final weights
};

/// Trains `plan` as rank `rank` of `ranks` from its initial weights (files named from the
/// working directory; a rank holding shards reads its shards of them), each rank taking its
/// batch of the world's from the token stream in rank order. With `devices`, the executor
/// runs the collectives on the device; without, `host` runs them (a group of one: none).
/// `overlapped` (with `devices`) updates each shard as its gradient lands (or, clipping, once
/// all are measured), on a worker, as mt-run does over NCCL; otherwise after the backward.
Trained train(const mt::plan::Plan &plan, const std::string &tokens, int rank, int ranks,
              mt::Communicator *devices, mt::Communicator &host, bool overlapped) {
  // With the collectives on the device a rank holds its shards alone.
  mt::HostState state(plan, /*streamCopy=*/true, host.rank(), host.size(),
                      devices ? mt::HostState::Masters::Sharded
                              : mt::HostState::Masters::Replicated);
  state.loadInitialWeights(".");
  std::unique_ptr<HostRelay> relay = devices ? std::make_unique<HostRelay>(*devices) : nullptr;
  mt::cuda::ExecutorOptions options;
  options.collectives = relay.get();
  mt::cuda::Executor executor(plan, state, options);
  auto backward = [&](const mt::DataParallelRank::Inputs &inputs,
                      std::vector<float *> &gradients) {
    double loss = executor.run(inputs).loss;
    for (size_t p = 0; p < gradients.size(); ++p)
      gradients[p] = executor.gradient(static_cast<int>(p));
    return loss;
  };
  mt::DataParallelRank dataParallel(state, host, backward,
                                    devices ? mt::DataParallelRank::Collectives::OnDevice
                                            : mt::DataParallelRank::Collectives::OnHost);
  const mt::plan::TensorType &ids = plan.step().values(plan.step().inputs(0).value()).type();
  mt::TokenData data(tokens, "u16");
  const std::vector<mt::WeightDecay> decays =
      mt::weightDecays(plan, plan.optimizer(), std::vector<float>(plan.parameters_size(), 0.0f));
  Trained trained;
  double losses[2] = {0, 0};
  std::atomic<int64_t> current{0};
  std::unique_ptr<mt::OverlappedUpdates> updates;
  if (overlapped) {
    auto decay = [&](int p) { return decays[p]; };
    updates = std::make_unique<mt::OverlappedUpdates>(
        dataParallel.overlappedOptimizer(
            [&](int p) { return executor.gradient(p); },
            [&](int64_t step) { return mt::learningRate(plan.optimizer(), step, kSteps); }, decay,
            losses),
        executor.readOrder(), plan.optimizer().grad_clip());
    executor.onGradient([&](int p) { updates->landed(p, current); });
    executor.awaitParameter([&](int p) { updates->waitFor(p); });
  }
  // A failed step leaves gradient callbacks on the streams: they end before the queue.
  try {
    for (int64_t step = 1; step <= kSteps; ++step) {
      mt::DataParallelRank::Inputs inputs;
      for (int r = 0; r < ranks; ++r) {
        mt::Batch batch = data.next(ids.shape(0), ids.shape(1), plan.vocabulary());
        if (r == rank) {
          inputs["input_ids"] = std::move(batch.inputs);
          inputs["targets"] = std::move(batch.targets);
        }
      }
      double lr = mt::learningRate(plan.optimizer(), step, kSteps);
      if (!overlapped) {
        mt::DataParallelRank::Result result = dataParallel.step(inputs, step, lr, decays);
        trained.losses.push_back(result.loss);
        trained.norms.push_back(result.gradNorm);
        continue;
      }
      current = step;
      losses[step & 1] = executor.run(inputs).loss;
      updates->backwardDone(step);
      if (step > 1) { // the last step's updates are done or nearly
        trained.norms.push_back(updates->finished(step - 1));
        trained.losses.push_back(losses[(step - 1) & 1]);
      }
    }
  } catch (...) {
    executor.drain();
    throw;
  }
  if (overlapped) {
    trained.norms.push_back(updates->finished(kSteps));
    trained.losses.push_back(losses[kSteps & 1]);
  }
  for (int p = 0; p < plan.parameters_size(); ++p)
    trained.masters.push_back(dataParallel.gathered(p));
  return trained;
}

enum class Ranks { DeviceCollectives, DeviceOverlapped, HostCollectives, Alone };

/// Two ranks as threads: one data-parallel group, or each alone.
std::vector<Trained> trainRanks(const mt::plan::Plan &plan, const std::string &tokens,
                                Ranks kind) {
  mt::ThreadGroup devices(kRanks), hosts(kRanks);
  std::vector<std::unique_ptr<mt::ThreadGroup>> alone;
  for (int r = 0; r < kRanks; ++r)
    alone.push_back(std::make_unique<mt::ThreadGroup>(1));
  std::vector<Trained> trained(kRanks);
  std::vector<std::exception_ptr> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      try {
        bool onDevice = kind == Ranks::DeviceCollectives || kind == Ranks::DeviceOverlapped;
        trained[r] = kind == Ranks::Alone
                         ? train(plan, tokens, r, kRanks, nullptr, alone[r]->member(0), false)
                         : train(plan, tokens, r, kRanks, onDevice ? &devices.member(r) : nullptr,
                                 hosts.member(r), kind == Ranks::DeviceOverlapped);
      } catch (...) {
        errors[r] = std::current_exception();
        devices.abort();
        hosts.abort();
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  for (std::exception_ptr error : errors)
    if (error)
      std::rethrow_exception(error);
  return trained;
}

/// The largest relative difference of two runs' losses.
double lossGap(const Trained &a, const Trained &b) {
  double gap = 0;
  for (int s = 0; s < kSteps; ++s)
    gap = std::max(gap, std::abs(a.losses[s] - b.losses[s]) / std::abs(b.losses[s]));
  return gap;
}

} // namespace

int main(int argc, char **argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 || argc != 4) {
    std::printf("usage: mt-gpu-data-parallel-test RANK_PLAN.mtp BATCHED_PLAN.mtp TOKENS (the "
                "batched plan with twice the rank plan's batch, on a machine with a CUDA "
                "device)\n");
    std::fflush(stdout);
    return 2;
  }
  try {
    mt::plan::Plan rankPlan = mt::loadPlan(argv[1]), batchedPlan = mt::loadPlan(argv[2]);
    // The weight files the plans name are beside them.
    for (auto [plan, path] : {std::pair{&rankPlan, std::string(argv[1])},
                              std::pair{&batchedPlan, std::string(argv[2])}}) {
      std::string folder =
          path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
      for (mt::plan::Parameter &parameter : *plan->mutable_parameters())
        if (!parameter.file().empty() && parameter.file().front() != '/')
          parameter.set_file(folder + "/" + parameter.file());
    }
    // Steps large enough that ranks which do not share their gradients drift apart, clipped
    // by the norm over every rank's shards.
    for (mt::plan::Plan *plan : {&rankPlan, &batchedPlan}) {
      mt::plan::AdamW &adamw = *plan->mutable_optimizer();
      adamw.set_lr(1e-2);
      adamw.set_warmup(0);
      adamw.set_schedule("constant");
      adamw.set_grad_clip(0.5);
    }
    std::string tokens = argv[3];
    mt::ThreadGroup one(1);
    Trained batched = train(batchedPlan, tokens, 0, 1, nullptr, one.member(0), false);
    std::vector<Trained> sharded = trainRanks(rankPlan, tokens, Ranks::DeviceCollectives);
    std::vector<Trained> onHost = trainRanks(rankPlan, tokens, Ranks::HostCollectives);
    // The shards updated as their gradients land (clipping: once every one is measured), as
    // after the backward.
    std::vector<Trained> overlapped = trainRanks(rankPlan, tokens, Ranks::DeviceOverlapped);
    mt::plan::Plan unclipped = rankPlan;
    unclipped.mutable_optimizer()->set_grad_clip(0);
    std::vector<Trained> afterBackward = trainRanks(unclipped, tokens, Ranks::DeviceCollectives);
    std::vector<Trained> unclippedOverlapped =
        trainRanks(unclipped, tokens, Ranks::DeviceOverlapped);
    // Ranks alone: their mean loss, which is the batched loss at the first step only.
    std::vector<Trained> ranksAlone = trainRanks(rankPlan, tokens, Ranks::Alone);
    Trained alone;
    for (int s = 0; s < kSteps; ++s) {
      double sum = 0;
      for (const Trained &rank : ranksAlone)
        sum += rank.losses[s];
      alone.losses.push_back(sum / kRanks);
    }

    int failures = 0;
    for (int r = 0; r < kRanks; ++r)
      if (sharded[r].masters != onHost[0].masters || sharded[r].losses != onHost[0].losses) {
        std::printf("FAIL: rank %d ends with other weights or losses than the ranks with the "
                    "collectives on the host\n",
                    r);
        ++failures;
      }
    for (int r = 0; r < kRanks; ++r)
      if (overlapped[r].masters != sharded[0].masters ||
          overlapped[r].losses != sharded[0].losses || overlapped[r].norms != sharded[0].norms ||
          unclippedOverlapped[r].masters != afterBackward[0].masters ||
          unclippedOverlapped[r].losses != afterBackward[0].losses ||
          unclippedOverlapped[r].norms != afterBackward[0].norms) {
        std::printf("FAIL: rank %d's overlapped updates end elsewhere than after the backward\n",
                    r);
        ++failures;
      }
    // The clipped runs must clip: some step's norm is over the bound.
    double clip = rankPlan.optimizer().grad_clip();
    if (std::none_of(sharded[0].norms.begin(), sharded[0].norms.end(),
                     [&](double norm) { return norm > clip; })) {
      std::printf("FAIL: no step's gradient norm is over the clip %g: clipping is not tested\n",
                  clip);
      ++failures;
    }
    double shardedGap = lossGap(sharded[0], batched), aloneGap = lossGap(alone, batched);
    for (int s = 0; s < kSteps; ++s)
      std::printf("step %d: loss %.6f over %d ranks, %.6f with twice the batch, %.6f alone\n",
                  s + 1, sharded[0].losses[s], kRanks, batched.losses[s], alone.losses[s]);
    if (shardedGap > kTolerance) {
      std::printf("FAIL: %d ranks' losses are %.3g from twice the batch's (tolerance %.0e)\n",
                  kRanks, shardedGap, kTolerance);
      ++failures;
    }
    if (aloneGap <= 2 * shardedGap) {
      std::printf("FAIL: ranks alone come as close (%.3g) as ranks together (%.3g)\n", aloneGap,
                  shardedGap);
      ++failures;
    }
    std::printf("%d ranks, collectives on the device, %d steps: the losses and weights of the "
                "collectives on the host, bit for bit, on every rank\n",
                kRanks, kSteps);
    std::printf("losses within %.3g of one rank with twice the batch (ranks alone: %.3g)\n",
                shardedGap, aloneGap);
    std::printf("the shards updated as their gradients land (clipped: once all are measured), "
                "clipped and not: the bits of updates after the backward\n");
    return failures == 0 ? 0 : 1;
  } catch (const std::exception &error) {
    std::printf("FAIL: %s\n", error.what());
    return 1;
  }
}
