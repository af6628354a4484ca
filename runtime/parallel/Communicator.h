// The collectives data-parallel training needs, whatever carries them: ranks as threads of
// one process (ThreadGroup, which CI runs) or one process per GPU over NCCL.
#ifndef MT_RUNTIME_PARALLEL_COMMUNICATOR_H
#define MT_RUNTIME_PARALLEL_COMMUNICATOR_H

#include "runtime/Shard.h"

#include <cstdint>

namespace mt {

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Averages every rank's `data` (count elements) over the ranks; afterwards this rank's shard
  /// of `data` (shardOf) holds the mean, summed in rank order, and the rest is unspecified.
  virtual void reduceScatterMean(float *data, int64_t count) = 0;
  /// Gives every rank all shards of `data`: each rank's own shard is what it holds.
  virtual void allGather(float *data, int64_t count) = 0;
  /// The sum of every rank's `value`, in rank order.
  virtual double allReduceSum(double value) = 0;
};

} // namespace mt

#endif // MT_RUNTIME_PARALLEL_COMMUNICATOR_H
