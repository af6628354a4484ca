// Device tensor copies with conversion.
#include "runtime/cuda/TensorCopy.h"

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/kernels/Access.cuh"

#include <algorithm>

namespace mt::cuda {
namespace {

__global__ void convert(Ref from, Ref to, int64_t n, bool reals) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    if (reals)
      storeReal(to, i, loadReal(from, i));
    else
      storeInt(to, i, loadInt(from, i));
  }
}

} // namespace

void copyTensor(const DeviceTensor &from, const DeviceTensor &to, cudaStream_t stream) {
  if (from.size() != to.size())
    throw CudaError("copyTensor: " + std::to_string(from.size()) + " elements into " +
                    std::to_string(to.size()));
  if (from.data == to.data && from.storage == to.storage)
    return;
  if (from.storage == to.storage) {
    MT_CUDA_CHECK(cudaMemcpyAsync(to.data, from.data, from.bytes(), cudaMemcpyDeviceToDevice,
                                  stream));
    return;
  }
  int64_t n = from.size();
  unsigned blocks = std::min<unsigned>(blocksFor(n), 65535u * 8);
  convert<<<std::max(blocks, 1u), 256, 0, stream>>>(from.ref(), to.ref(), n, isReal(to.storage));
  MT_CUDA_CHECK(cudaGetLastError());
}

} // namespace mt::cuda
