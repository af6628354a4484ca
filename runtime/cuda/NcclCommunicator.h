// The collectives of data-parallel training between processes, one per GPU, over NCCL. NCCL
// is loaded when a run asks for ranks (dlopen of libnccl.so.2), so mt-run starts without it.
#ifndef MT_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define MT_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "runtime/cuda/PinnedMemory.h"
#include "runtime/parallel/Communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstddef>

namespace mt::cuda {

/// NCCL's id of a new group, made by one process and handed to every rank before it joins.
ncclUniqueId newNcclGroup();

class NcclCommunicator : public Communicator {
public:
  /// Joins group `id` as `rank` of `ranks` on the current CUDA device (NCCL_NVLS_ENABLE and
  /// the other multicast switches are set off first).
  NcclCommunicator(const ncclUniqueId &id, int rank, int ranks);
  /// Host data inside `pinned`'s registrations is copied through it (a copy may not span two
  /// registrations); other host data is copied directly.
  void useHostMemory(const PinnedMemory *pinned) { hostMemory = pinned; }
  ~NcclCommunicator() override;
  /// Ends the group at once: a collective waiting for a rank that is gone returns an error.
  void abort();
  /// Allocates the device staging buffer for collectives of up to `count` elements now, not
  /// during a step (where cudaFree would stall the device), and returns its bytes.
  size_t reserve(int64_t count);
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  int rank() const override { return self; }
  int size() const override { return ranks; }
  /// Host data travels through a device staging buffer: NCCL reduces device memory.
  void reduceScatterMean(float *data, int64_t count) override;
  void allGather(float *data, int64_t count) override;
  double allReduceSum(double value) override;

private:
  /// The staging buffer, grown to at least `bytes`.
  char *staging(size_t bytes);
  void copy(void *device, void *host, size_t bytes, cudaMemcpyKind kind);

  int self, ranks;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  char *buffer = nullptr;
  size_t bufferBytes = 0;
  const PinnedMemory *hostMemory = nullptr;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
