// One rank of data-parallel training with ZeRO-style sharded optimizer state: the rank runs
// the step on its own batch with full weights, the gradients are averaged over the ranks and
// scattered so that each rank holds the mean of its shard of every parameter, the rank
// updates the fp32 masters and AdamW moments of that shard only (its host state holds the
// moments of its shards alone, and with the collectives on the device its masters too), and
// the updated shards are gathered into every rank's weights for the next step.
#ifndef MT_RUNTIME_PARALLEL_DATAPARALLEL_H
#define MT_RUNTIME_PARALLEL_DATAPARALLEL_H

#include "runtime/AdamW.h"
#include "runtime/HostState.h"
#include "runtime/OverlappedUpdates.h"
#include "runtime/parallel/Communicator.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mt {

class DataParallelRank {
public:
  using Inputs = std::map<std::string, std::vector<int64_t>>;
  /// Runs forward and backward on this rank's backend with the state's weights and returns
  /// the loss and one writable fp32 gradient per parameter, valid until the next call.
  using Backward = std::function<double(const Inputs &, std::vector<float *> &gradients)>;

  /// Where the gradients are averaged and the updated weights gathered: by the communicator
  /// in host memory, or by the device around its offloads and uploads (the backward's
  /// gradients hold this rank's shard of the mean already, and the next backward gathers the
  /// weights it uploads).
  enum class Collectives { OnHost, OnDevice };

  /// `state` is this rank's (HostState(plan, ..., rank, ranks)): the masters, the same on
  /// every rank at the start, and the moments of the rank's shards; OnHost, its masters are
  /// replicated. After each step the masters are the gathered updated weights (OnDevice:
  /// this rank's shards are updated, the rest is the device's to gather), and the state's
  /// bf16 copies, where it keeps them, follow the masters.
  DataParallelRank(HostState &state, Communicator &communicator, Backward backward,
                   Collectives collectives = Collectives::OnHost);

  struct Result {
    double loss;     // the mean over the ranks
    double gradNorm; // of the averaged gradients, before clipping
    bool skipped;    // guarded, and the loss or the norm not finite: no update applied
  };
  /// One optimizer step (from 1) on this rank's inputs: the backward, then every parameter's
  /// collectives and update (after the global norm when clipping). `guarded`: a step whose
  /// mean loss or gradient norm is not finite applies no update (every rank alike).
  Result step(const Inputs &inputs, int64_t step, double lr, const std::vector<WeightDecay> &decays,
              bool guarded = false);

  /// The overlapped form of a step (OnDevice), for OverlappedUpdates, which hands over
  /// gradients as the backward produces them, in any order. updateShard: the AdamW of p's
  /// shard from its mean gradient times `clip` (clipScale of the global norm); returns the
  /// squared norm of this rank's shard of the mean gradient, as shardSquares does.
  double updateShard(int p, float *gradient, int64_t step, double lr, WeightDecay decay,
                     float clip = 1.0f);
  double shardSquares(int p, const float *gradient) const;
  /// The norm of the whole mean gradient from this rank's shards' squares (a collective).
  double globalNorm(double squares);
  /// The mean of the ranks' losses (a collective).
  double meanLoss(double loss);
  /// OverlappedUpdates' work for this rank (OnDevice): updateShard of `gradient(p)` at
  /// `lr(step)` and `decay(p)`, shardSquares of it, globalNorm, and at each step's end the
  /// rank's loss in `losses[step & 1]` replaced by meanLoss.
  OverlappedUpdates::Optimizer overlappedOptimizer(std::function<float *(int p)> gradient,
                                                   std::function<double(int64_t step)> lr,
                                                   std::function<WeightDecay(int p)> decay,
                                                   double (&losses)[2]);
  /// p's weights from every rank's shard of the masters (a collective): the final weights.
  std::vector<float> gathered(int p);

private:
  /// Averages parameter p's gradient over the ranks (OnHost); returns the squared norm of this
  /// rank's shard of it.
  double reduce(int p, float *gradient);
  /// AdamW of this rank's shard of p from its mean gradient times `clip`; returns the
  /// squared norm of the shard's mean gradient.
  double apply(int p, float *gradient, float clip, int64_t step, double lr, WeightDecay decay);
  /// The all-gather of p's updated weights into the replicated masters and bf16 copies.
  void gather(int p);

  HostState &state;
  Communicator &communicator;
  Backward backward;
  Collectives collectives;
};

} // namespace mt

#endif // MT_RUNTIME_PARALLEL_DATAPARALLEL_H
