// Copies a device tensor into another of the same shape, converting between storages (a
// template's bf16 result into a call's fp32 gradient buffer, for instance).
#ifndef MT_RUNTIME_CUDA_TENSORCOPY_H
#define MT_RUNTIME_CUDA_TENSORCOPY_H

#include "runtime/cuda/DeviceTensor.h"

#include <cuda_runtime.h>

namespace mt::cuda {

/// Enqueues to = from on `stream`: a plain copy when the storages match, else a conversion.
void copyTensor(const DeviceTensor &from, const DeviceTensor &to, cudaStream_t stream);

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_TENSORCOPY_H
