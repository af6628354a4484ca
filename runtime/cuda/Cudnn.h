// cuDNN's graph (backend) API through dlopen: the entry points, a handle, and descriptors that
// are destroyed with their owner. mt runs without cuDNN; where it loads, fused attention uses it.
#ifndef MT_RUNTIME_CUDA_CUDNN_H
#define MT_RUNTIME_CUDA_CUDNN_H

#include <cudnn_graph.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mt::cuda {

/// The entry points mt calls, bound from libcudnn.so.9.
struct CudnnApi {
  cudnnStatus_t (*create)(cudnnHandle_t *);
  cudnnStatus_t (*destroy)(cudnnHandle_t);
  cudnnStatus_t (*setStream)(cudnnHandle_t, cudaStream_t);
  size_t (*version)();
  const char *(*errorString)(cudnnStatus_t);
  void (*lastError)(char *, size_t);
  cudnnStatus_t (*createDescriptor)(cudnnBackendDescriptorType_t, cudnnBackendDescriptor_t *);
  cudnnStatus_t (*destroyDescriptor)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*finalize)(cudnnBackendDescriptor_t);
  cudnnStatus_t (*setAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t, const void *);
  cudnnStatus_t (*getAttribute)(cudnnBackendDescriptor_t, cudnnBackendAttributeName_t,
                                cudnnBackendAttributeType_t, int64_t, int64_t *, void *);
  cudnnStatus_t (*execute)(cudnnHandle_t, cudnnBackendDescriptor_t, cudnnBackendDescriptor_t);
};

/// cuDNN, loaded on first use (MT_CUDNN_LIBRARY names the file, else libcudnn.so.9 on the
/// loader's path or in /usr/local/cuda/lib64); null when it cannot be, with the reason in
/// `why`.
const CudnnApi *loadCudnn(std::string *why);

/// A failed cuDNN call: the call and cuDNN's reason.
struct CudnnError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// One backend descriptor, destroyed with its owner.
class CudnnDescriptor {
public:
  CudnnDescriptor(const CudnnApi &api, cudnnBackendDescriptorType_t type);
  ~CudnnDescriptor();
  CudnnDescriptor(const CudnnDescriptor &) = delete;
  CudnnDescriptor &operator=(const CudnnDescriptor &) = delete;

  cudnnBackendDescriptor_t get() const { return descriptor; }

  /// Sets `name` to `count` values of `type` (throws naming the attribute).
  CudnnDescriptor &set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type,
                       int64_t count, const void *values);
  CudnnDescriptor &set(cudnnBackendAttributeName_t name, int64_t value) {
    return set(name, CUDNN_TYPE_INT64, 1, &value);
  }
  CudnnDescriptor &set(cudnnBackendAttributeName_t name, const std::vector<int64_t> &values) {
    return set(name, CUDNN_TYPE_INT64, static_cast<int64_t>(values.size()), values.data());
  }
  CudnnDescriptor &set(cudnnBackendAttributeName_t name, const CudnnDescriptor &other) {
    cudnnBackendDescriptor_t d = other.get();
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
  }
  /// Finalizes it (throws with cuDNN's reason).
  CudnnDescriptor &finalize();

private:
  const CudnnApi &api;
  cudnnBackendDescriptor_t descriptor = nullptr;
};

/// Throws a CudnnError naming `call` unless `status` is success.
void checkCudnn(const CudnnApi &api, cudnnStatus_t status, const std::string &call);

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_CUDNN_H
