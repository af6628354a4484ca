// One rank of data-parallel training with ZeRO-style sharded optimizer state: the rank runs
// the step on its own batch with full weights, the gradients are averaged over the ranks and
// scattered so that each rank holds the mean of its shard of every parameter, the rank
// updates the fp32 masters and AdamW moments of that shard only (1/N of the state), and the
// updated shards are gathered into every rank's weights for the next step.
#ifndef MT_RUNTIME_PARALLEL_DATAPARALLEL_H
#define MT_RUNTIME_PARALLEL_DATAPARALLEL_H

#include "plan/plan.pb.h"
#include "runtime/parallel/Communicator.h"

#include <functional>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace mt {

class DataParallelRank {
public:
  using Inputs = std::map<std::string, std::vector<int64_t>>;
  /// Runs forward and backward on this rank's backend with the weights in `weights` (which
  /// the rank keeps current) and returns the loss and one writable fp32 gradient per
  /// parameter, valid until the next call.
  using Backward = std::function<double(const Inputs &, std::vector<float *> &gradients)>;

  /// `weights` holds every parameter's full weights, the same on every rank at the start;
  /// after each step they are the gathered updated weights, and `updated` is called so that
  /// the backend can refresh what it streams (bf16 copies).
  DataParallelRank(const plan::Plan &plan, Communicator &communicator,
                   std::vector<float *> weights, Backward backward,
                   std::function<void()> updated = {});

  struct Result {
    double loss;     // the mean over the ranks
    double gradNorm; // of the averaged gradients, before clipping
  };
  /// One optimizer step (from 1) on this rank's inputs: the backward, then every parameter's
  /// collectives and update (after the global norm when clipping).
  Result step(const Inputs &inputs, int64_t step, double lr, const std::regex &noDecay);

  /// The overlapped form of a step without clipping, for a caller that hands over gradients as
  /// the backward produces them. Every rank must make the same calls in the same order, since
  /// each is a collective: updateShard for every parameter (as its gradient lands), gather
  /// for every parameter (in the order the next step reads them), then finishStep.
  /// updateShard: p's reduce-scatter and its shard's AdamW; returns the squared norm of this
  /// rank's shard of the mean gradient.
  double updateShard(int p, float *gradient, int64_t step, double lr, double decay);
  /// The all-gather of p's updated weights into the weights.
  void gather(int p);
  /// The step's mean loss over the ranks and its gradient norm, from this rank's loss and the
  /// sum of its updateShard results.
  Result finishStep(double loss, double squares);

  /// Bytes of optimizer state (masters and moments of this rank's shards).
  int64_t stateBytes() const;

private:
  /// Averages parameter p's gradient over the ranks; returns the squared norm of this rank's
  /// shard of it.
  double reduce(int p, float *gradient);
  /// AdamW of this rank's shard of p from its mean gradient (scaled by `clip`) into the
  /// weights; returns the squared norm of the shard's gradient as used.
  double apply(int p, float *gradient, float clip, int64_t step, double lr, double decay);

  const plan::Plan &plan;
  Communicator &communicator;
  std::vector<float *> full; // every parameter's weights, for the forward
  Backward backward;
  std::function<void()> updated;
  std::vector<int64_t> counts;
  std::vector<std::vector<float>> master, first, second; // this rank's shards
};

} // namespace mt

#endif // MT_RUNTIME_PARALLEL_DATAPARALLEL_H
