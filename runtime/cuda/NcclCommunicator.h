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
#include <mutex>

namespace mt::cuda {

/// NCCL's id of a new group, made by one process and handed to every rank before it joins.
ncclUniqueId newNcclGroup();

class NcclCommunicator : public Communicator, public DeviceCollectives {
public:
  /// Joins group `id` as `rank` of `ranks` on the current CUDA device (NCCL_NVLS_ENABLE and
  /// the other multicast switches are set off first). A collective: every rank constructs
  /// its communicator at once, and NCCL connects the ranks then, not during a step.
  NcclCommunicator(const ncclUniqueId &id, int rank, int ranks);
  ~NcclCommunicator() override;
  /// Ends the group at once, from any thread: a collective waiting for a rank that is gone
  /// returns an error, the device's collectives stop waiting, so that its streams can drain,
  /// and later collectives throw.
  void abort();
  /// The device memory NCCL took when the ranks joined, beside the plan's.
  int64_t deviceBytes() const { return joinedBytes; }
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  int rank() const override { return self; }
  int size() const override { return ranks; }
  /// Ranks over NCCL average their gradients on the device (reduceMean): this throws.
  void reduceScatterMean(float *data, int64_t count) override;
  /// Host data travels through a device staging buffer, grown to the largest parameter's
  /// blocks (the final gathers run once the executor has freed its memory); a step's scalars
  /// fit in what the constructor allocates.
  void allGather(float *data, int64_t count) override;
  double allReduceSum(double value) override;
  void reduceMean(float *gradient, int64_t count, cudaStream_t stream) override;
  void gather(void *weights, int64_t count, int width, cudaStream_t stream) override;

private:
  /// Frees what the communicator holds; idempotent.
  void release();
  /// The right to hand NCCL a collective; throws once the group is aborted (its
  /// communicators are gone).
  std::unique_lock<std::timed_mutex> enter();
  /// The staging buffer, grown to at least `bytes`.
  char *staging(size_t bytes);
  void copy(void *device, void *host, size_t bytes, cudaMemcpyKind kind);

  int self, ranks;
  ncclComm_t comm = nullptr;
  // The device's reductions and gathers run on different streams, each kind in plan order:
  // each kind has a communicator of its own, whose collectives then run in one order on
  // every rank. Their kernels (and the host collectives') wait for peers at the same time:
  // NCCL runs that only while they fit on the GPU together, which their few blocks each do
  // beside the step's kernels.
  ncclComm_t reductions = nullptr, gathers = nullptr;
  // Held while a thread hands NCCL a collective (the executor's thread and the update
  // worker both do): NCCL takes the calls of one device's communicators from one thread at a
  // time, and abort must not free a communicator under a call.
  std::timed_mutex issuing;
  bool aborted = false;
  int64_t joinedBytes = 0;
  cudaStream_t stream = nullptr;
  char *buffer = nullptr;
  size_t bufferBytes = 0;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
