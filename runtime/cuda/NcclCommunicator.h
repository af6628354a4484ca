// The collectives of data-parallel training between processes, one per GPU, over NCCL: on
// host data (the step's loss and norm, the final weights) and on the executor's device
// buffers. NCCL is loaded when a run asks for ranks (dlopen of libnccl.so.2), so mt-run
// starts without it.
#ifndef MT_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define MT_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "runtime/cuda/DeviceCollectives.h"
#include "runtime/parallel/Communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>

namespace mt::cuda {

/// NCCL's id of a new group, made by one process and handed to every rank before it joins.
ncclUniqueId newNcclGroup();

class NcclCommunicator : public Communicator, public DeviceCollectives {
public:
  /// Joins group `id` as `rank` of `ranks` on the current CUDA device (NCCL_NVLS_ENABLE and
  /// the other multicast switches are set off first). A collective: every rank constructs
  /// its communicator at once.
  NcclCommunicator(const ncclUniqueId &id, int rank, int ranks);
  ~NcclCommunicator() override;
  /// Ends the group at once: a collective waiting for a rank that is gone returns an error,
  /// and the device's collectives stop waiting, so that its streams can drain.
  void abort();
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  int rank() const override { return self; }
  int size() const override { return ranks; }
  /// Host data travels through a device staging buffer, grown to the largest parameter's
  /// blocks (the final gathers run once the executor has freed its memory); a step's scalars
  /// fit in what the constructor allocates.
  void reduceScatterMean(float *data, int64_t count) override;
  void allGather(float *data, int64_t count) override;
  double allReduceSum(double value) override;
  void reduceMean(float *gradient, int64_t count, cudaStream_t stream) override;
  void gather(void *weights, int64_t count, int width, cudaStream_t stream) override;

private:
  /// The staging buffer, grown to at least `bytes`.
  char *staging(size_t bytes);
  void copy(void *device, void *host, size_t bytes, cudaMemcpyKind kind);

  int self, ranks;
  ncclComm_t comm = nullptr;
  // The device's reductions and gathers run on different streams, each kind in plan order:
  // each kind has a communicator of its own, whose collectives then run in one order on
  // every rank.
  ncclComm_t reductions = nullptr, gathers = nullptr;
  cudaStream_t stream = nullptr;
  char *buffer = nullptr;
  size_t bufferBytes = 0;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
