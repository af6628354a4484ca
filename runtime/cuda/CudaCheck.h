// Checks on every CUDA runtime and cuBLAS call: a failure throws with the call, its file and
// line, and the library's own message.
#ifndef MT_RUNTIME_CUDA_CUDACHECK_H
#define MT_RUNTIME_CUDA_CUDACHECK_H

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace mt::cuda {

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t status, const char *call, const char *file, int line) {
  if (status != cudaSuccess)
    throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    cudaGetErrorString(status));
}

inline void check(cublasStatus_t status, const char *call, const char *file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                    cublasLtGetStatusString(status));
}

} // namespace mt::cuda

#define MT_CUDA_CHECK(call) ::mt::cuda::check((call), #call, __FILE__, __LINE__)

#endif // MT_RUNTIME_CUDA_CUDACHECK_H
