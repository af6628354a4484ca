// A data-parallel rank's step: backward, reduce-scatter, sharded AdamW, all-gather.
#include "runtime/parallel/DataParallel.h"

#include "runtime/AdamW.h"

#include <cmath>

namespace mt {

DataParallelRank::DataParallelRank(const plan::Plan &plan, Communicator &communicator,
                                   const std::vector<const float *> &initial)
    : plan(plan), communicator(communicator), executor(plan) {
  for (int p = 0; p < plan.parameters_size(); ++p) {
    int64_t count = 1;
    for (int64_t d : plan.parameters(p).type().shape())
      count *= d;
    full.emplace_back(initial[p], initial[p] + count);
    Shard shard = shardOf(count, communicator.rank(), communicator.size());
    master.emplace_back(initial[p] + shard.begin, initial[p] + shard.end);
    first.emplace_back(shard.size(), 0.0f);
    second.emplace_back(shard.size(), 0.0f);
  }
}

int64_t DataParallelRank::stateBytes() const {
  int64_t bytes = 0;
  for (const std::vector<float> &shard : master)
    bytes += 12 * static_cast<int64_t>(shard.size());
  return bytes;
}

DataParallelRank::Result
DataParallelRank::step(const std::map<std::string, std::vector<int64_t>> &inputs,
                       int64_t step, double lr, const std::regex &noDecay) {
  std::vector<const float *> weights;
  for (const std::vector<float> &w : full)
    weights.push_back(w.data());
  host::StepResult<float> result = executor.run(weights, inputs);
  const plan::AdamW &adamw = plan.optimizer();
  int rank = communicator.rank(), ranks = communicator.size();

  // Each rank ends with the mean gradient of its shards; the norm of the whole is the sum of
  // the shards' squares over the ranks.
  double squares = 0;
  for (int p = 0; p < plan.parameters_size(); ++p) {
    std::vector<float> &gradient = result.gradients[p];
    communicator.reduceScatterMean(gradient.data(), static_cast<int64_t>(gradient.size()));
    Shard shard = shardOf(static_cast<int64_t>(gradient.size()), rank, ranks);
    squares += squaredNorm(gradient.data() + shard.begin, shard.size());
  }
  double norm = std::sqrt(communicator.allReduceSum(squares));
  float clip = adamw.grad_clip() > 0 && norm > adamw.grad_clip()
                   ? static_cast<float>(adamw.grad_clip() / (norm + 1e-6))
                   : 1.0f;

  for (int p = 0; p < plan.parameters_size(); ++p) {
    std::vector<float> &gradient = result.gradients[p];
    Shard shard = shardOf(static_cast<int64_t>(gradient.size()), rank, ranks);
    float *own = gradient.data() + shard.begin;
    if (clip != 1.0f)
      for (int64_t i = 0; i < shard.size(); ++i)
        own[i] *= clip;
    double decay =
        std::regex_search(plan.parameters(p).name(), noDecay) ? 0.0 : adamw.weight_decay();
    adamwUpdate(master[p].data(), first[p].data(), second[p].data(), own, shard.size(), lr,
                decay, adamw, step);
    std::copy(master[p].begin(), master[p].end(), full[p].begin() + shard.begin);
    communicator.allGather(full[p].data(), static_cast<int64_t>(full[p].size()));
  }
  return {communicator.allReduceSum(result.loss) / ranks, norm};
}

} // namespace mt
