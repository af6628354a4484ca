// A data-parallel rank's step: backward, reduce-scatter, sharded AdamW, all-gather.
#include "runtime/parallel/DataParallel.h"

#include "runtime/AdamW.h"

#include <cmath>

namespace mt {

DataParallelRank::DataParallelRank(const plan::Plan &plan, Communicator &communicator,
                                   std::vector<float *> weights, Backward backward,
                                   std::function<void()> updated)
    : plan(plan), communicator(communicator), full(std::move(weights)),
      backward(std::move(backward)), updated(std::move(updated)) {
  for (int p = 0; p < plan.parameters_size(); ++p) {
    int64_t count = 1;
    for (int64_t d : plan.parameters(p).type().shape())
      count *= d;
    counts.push_back(count);
    Shard shard = shardOf(count, communicator.rank(), communicator.size());
    master.emplace_back(full[p] + shard.begin, full[p] + shard.end);
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

double DataParallelRank::reduce(int p, float *gradient) {
  communicator.reduceScatterMean(gradient, counts[p]);
  Shard shard = shardOf(counts[p], communicator.rank(), communicator.size());
  return squaredNorm(gradient + shard.begin, shard.size());
}

double DataParallelRank::apply(int p, float *gradient, float clip, int64_t step, double lr,
                             double decay) {
  Shard shard = shardOf(counts[p], communicator.rank(), communicator.size());
  float *own = gradient + shard.begin;
  if (clip != 1.0f)
    for (int64_t i = 0; i < shard.size(); ++i)
      own[i] *= clip;
  double squares = adamwUpdate(master[p].data(), first[p].data(), second[p].data(), own,
                               shard.size(), lr, decay, plan.optimizer(), step);
  std::copy(master[p].begin(), master[p].end(), full[p] + shard.begin);
  return squares;
}

double DataParallelRank::updateShard(int p, float *gradient, int64_t step, double lr,
                                     double decay) {
  communicator.reduceScatterMean(gradient, counts[p]);
  return apply(p, gradient, 1.0f, step, lr, decay);
}

void DataParallelRank::gather(int p) { communicator.allGather(full[p], counts[p]); }

DataParallelRank::Result DataParallelRank::finishStep(double loss, double squares) {
  double norm = std::sqrt(communicator.allReduceSum(squares));
  return {communicator.allReduceSum(loss) / communicator.size(), norm};
}

DataParallelRank::Result DataParallelRank::step(const Inputs &inputs, int64_t step, double lr,
                                                const std::regex &noDecay) {
  std::vector<float *> gradients(plan.parameters_size());
  double loss = backward(inputs, gradients);
  const plan::AdamW &adamw = plan.optimizer();
  // Each rank ends with the mean gradient of its shards; the norm of the whole is the sum of
  // the shards' squares over the ranks.
  double squares = 0;
  for (int p = 0; p < plan.parameters_size(); ++p)
    squares += reduce(p, gradients[p]);
  double norm = std::sqrt(communicator.allReduceSum(squares));
  float clip = adamw.grad_clip() > 0 && norm > adamw.grad_clip()
                   ? static_cast<float>(adamw.grad_clip() / (norm + 1e-6))
                   : 1.0f;
  for (int p = 0; p < plan.parameters_size(); ++p) {
    double decay =
        std::regex_search(plan.parameters(p).name(), noDecay) ? 0.0 : adamw.weight_decay();
    apply(p, gradients[p], clip, step, lr, decay);
    gather(p);
  }
  if (updated)
    updated();
  return {communicator.allReduceSum(loss) / communicator.size(), norm};
}

} // namespace mt
