// Owners of CUDA resources: a stream, an event and a device allocation, each created once and
// destroyed when its owner goes (move-only), so that no path through a failure leaks one or
// frees it twice. The owner of several must wait for the device before they go.
#ifndef MT_RUNTIME_CUDA_CUDAHANDLES_H
#define MT_RUNTIME_CUDA_CUDAHANDLES_H

#include "runtime/cuda/CudaCheck.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <utility>

namespace mt::cuda {

/// Shared by the owners: a handle and the call that destroys it.
template <typename Handle, cudaError_t (*Destroy)(Handle)>
class CudaOwner {
public:
  CudaOwner() = default;
  CudaOwner(const CudaOwner &) = delete;
  CudaOwner &operator=(const CudaOwner &) = delete;
  CudaOwner(CudaOwner &&other) noexcept : handle(std::exchange(other.handle, nullptr)) {}
  CudaOwner &operator=(CudaOwner &&other) noexcept {
    std::swap(handle, other.handle);
    return *this;
  }
  ~CudaOwner() {
    if (handle)
      Destroy(handle);
  }
  Handle get() const { return handle; }
  operator Handle() const { return handle; }

protected:
  Handle handle = nullptr;
};

/// A stream that does not synchronize with the legacy default stream.
class Stream : public CudaOwner<cudaStream_t, cudaStreamDestroy> {
public:
  static Stream create() {
    Stream stream;
    MT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream.handle, cudaStreamNonBlocking));
    return stream;
  }
};

/// An event for ordering streams (no timing, cheaper), or for measuring time.
class Event : public CudaOwner<cudaEvent_t, cudaEventDestroy> {
public:
  static Event forOrdering() { return make(cudaEventDisableTiming); }
  static Event forTiming() { return make(cudaEventDefault); }

private:
  static Event make(unsigned flags) {
    Event event;
    MT_CUDA_CHECK(cudaEventCreateWithFlags(&event.handle, flags));
    return event;
  }
};

/// Device memory of at least one byte (so that an empty pool still has an address).
class DeviceAllocation : public CudaOwner<void *, cudaFree> {
public:
  static DeviceAllocation create(size_t bytes) {
    DeviceAllocation allocation;
    MT_CUDA_CHECK(cudaMalloc(&allocation.handle, std::max<size_t>(bytes, 1)));
    return allocation;
  }
  char *data() const { return static_cast<char *>(handle); }
};

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_CUDAHANDLES_H
