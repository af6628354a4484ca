// A data-parallel rank's step: backward, reduce-scatter, sharded AdamW, all-gather (the
// collectives on the host, or left to the device).
#include "runtime/parallel/DataParallel.h"

#include "runtime/AdamW.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace mt {

DataParallelRank::DataParallelRank(HostState &state, Communicator &communicator,
                                   Backward backward, Collectives collectives)
    : state(state), communicator(communicator), backward(std::move(backward)),
      collectives(collectives) {
  for (size_t p = 0; p < state.parameters.size(); ++p) {
    const ParameterState &parameter = state.parameters[p];
    Shard shard = shardOf(parameter.count, communicator.rank(), communicator.size());
    if (parameter.owned.begin != shard.begin || parameter.owned.end != shard.end)
      throw std::invalid_argument("the host state of " + state.plan.parameters(p).name() +
                                  " is not rank " + std::to_string(communicator.rank()) +
                                  "'s of " + std::to_string(communicator.size()));
    if (collectives == Collectives::OnHost && parameter.held.size() != parameter.count)
      throw std::invalid_argument("collectives on the host gather every master: the host "
                                  "state of " + state.plan.parameters(p).name() +
                                  " holds a shard of them");
  }
}

double DataParallelRank::reduce(int p, float *gradient) {
  if (collectives == Collectives::OnHost)
    communicator.reduceScatterMean(gradient, state.parameters[p].count);
  return shardSquares(p, gradient);
}

double DataParallelRank::shardSquares(int p, const float *gradient) const {
  const ParameterState &parameter = state.parameters[p];
  return squaredNorm(gradient + parameter.owned.begin, parameter.owned.size());
}

double DataParallelRank::globalNorm(double squares) {
  return std::sqrt(communicator.allReduceSum(squares));
}

double DataParallelRank::apply(int p, float *gradient, float clip, int64_t step, double lr,
                               WeightDecay decay) {
  const ParameterState &parameter = state.parameters[p];
  Shard shard = parameter.owned;
  int64_t at = shard.begin - parameter.held.begin;
  return adamwUpdate(parameter.weightsAt(at), parameter.firstMoment, parameter.secondMoment,
                     gradient + shard.begin, shard.size(), lr, decay.rate, state.plan.optimizer(),
                     step, clip, decay.center);
}

double DataParallelRank::updateShard(int p, float *gradient, int64_t step, double lr,
                                     WeightDecay decay, float clip) {
  // On the host, a reduce-scatter per parameter as gradients land would need every rank to
  // hand them over in one order; the device's collectives run in plan order.
  if (collectives == Collectives::OnHost)
    throw std::logic_error("overlapped updates take gradients the device averaged");
  return apply(p, gradient, clip, step, lr, decay);
}

void DataParallelRank::gather(int p) {
  ParameterState &parameter = state.parameters[p];
  if (parameter.master) {
    communicator.allGather(parameter.master, parameter.count);
    return;
  }
  std::vector<float> weights = parameter.masters();
  communicator.allGather(weights.data(), parameter.count);
  parameter.writeMasters(0, parameter.count, weights.data());
}

std::vector<float> DataParallelRank::gathered(int p) {
  const ParameterState &parameter = state.parameters[p];
  std::vector<float> weights(parameter.count);
  parameter.readMasters(parameter.owned.begin - parameter.held.begin, parameter.owned.size(),
                        weights.data() + parameter.owned.begin);
  communicator.allGather(weights.data(), parameter.count);
  return weights;
}

double DataParallelRank::meanLoss(double loss) {
  return communicator.allReduceSum(loss) / communicator.size();
}

OverlappedUpdates::Optimizer DataParallelRank::overlappedOptimizer(
    std::function<float *(int p)> gradient, std::function<double(int64_t step)> lr,
    std::function<WeightDecay(int p)> decay, double (&losses)[2]) {
  OverlappedUpdates::Optimizer optimizer;
  optimizer.update = [this, gradient, lr, decay](int p, int64_t step, float clip) {
    return updateShard(p, gradient(p), step, lr(step), decay(p), clip);
  };
  optimizer.measure = [this, gradient](int p) { return shardSquares(p, gradient(p)); };
  optimizer.norm = [this](double squares) { return globalNorm(squares); };
  optimizer.finish = [this, &losses](int64_t step) {
    losses[step & 1] = meanLoss(losses[step & 1]);
  };
  return optimizer;
}

DataParallelRank::Result DataParallelRank::step(const Inputs &inputs, int64_t step, double lr,
                                                const std::vector<WeightDecay> &decays,
                                                bool guarded) {
  const plan::Plan &plan = state.plan;
  std::vector<float *> gradients(plan.parameters_size());
  double loss = backward(inputs, gradients);
  const plan::AdamW &adamw = plan.optimizer();
  // Each rank ends with the mean gradient of its shards; the norm of the whole is the sum of
  // the shards' squares over the ranks.
  double squares = 0;
  for (int p = 0; p < plan.parameters_size(); ++p)
    squares += reduce(p, gradients[p]);
  double norm = globalNorm(squares);
  double mean = meanLoss(loss);
  bool skipped = guarded && !(std::isfinite(norm) && std::isfinite(mean));
  float clip = clipScale(norm, adamw.grad_clip());
  for (int p = 0; p < plan.parameters_size(); ++p) {
    if (!skipped)
      apply(p, gradients[p], clip, step, lr, decays[p]);
    if (collectives == Collectives::OnHost)
      gather(p);
  }
  return {mean, norm, skipped};
}

} // namespace mt
