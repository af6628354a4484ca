// The collectives of a data-parallel step on device memory, issued by the executor on its own
// streams: each gradient averaged over the ranks before its offload, each weight gathered
// after its upload, so that only a rank's shard of either crosses PCIe.
#ifndef MT_RUNTIME_CUDA_DEVICECOLLECTIVES_H
#define MT_RUNTIME_CUDA_DEVICECOLLECTIVES_H

#include <cuda_runtime.h>

#include <cstdint>

namespace mt::cuda {

class DeviceCollectives {
public:
  virtual ~DeviceCollectives() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Issues on `stream`: this rank's shard (shardOf) of `gradient`, `count` fp32 elements of
  /// device memory, becomes the mean over the ranks; the rest is unspecified. Every rank
  /// issues its reductions in one order.
  virtual void reduceMean(float *gradient, int64_t count, cudaStream_t stream) = 0;
  /// Issues on `stream`: every rank's shard of `weights`, `count` elements of `width` bytes
  /// in device memory, lands in every other rank's. Every rank issues its gathers in one
  /// order.
  virtual void gather(void *weights, int64_t count, int width, cudaStream_t stream) = 0;
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_DEVICECOLLECTIVES_H
