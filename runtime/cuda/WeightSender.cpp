// Persistent weights: an update's masters across PCIe a piece at a time as they are written,
// cast to bf16 on the device.
#include "runtime/cuda/WeightSender.h"

#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/PinnedMemory.h"
#include "runtime/cuda/TensorCopy.h"

#include <algorithm>
#include <stdexcept>

namespace mt::cuda {

WeightSender::WeightSender(const PinnedMemory &pinned, float *staging, int64_t pieceElements)
    : pinned(pinned), staging(staging), pieceElements(pieceElements) {
  if (pieceElements <= 0)
    throw std::invalid_argument("WeightSender needs a staging buffer");
}

void WeightSender::send(const std::vector<uint16_t *> &targets, const float *masters, int64_t first,
                        int64_t count, const Write &write) {
  std::lock_guard<std::mutex> lock(sending);
  for (int64_t at = first; at < first + count; at += pieceElements) {
    int64_t n = std::min(pieceElements, first + count - at);
    write(at, n);
    // The stream's order keeps each cast ahead of the next piece's crossing into the staging.
    pinned.copy(staging, const_cast<float *>(masters + at), n * sizeof(float),
                cudaMemcpyHostToDevice, stream);
    for (uint16_t *target : targets)
      copyTensor(DeviceTensor{staging, Storage::F32, {n}},
                 DeviceTensor{target + at, Storage::BF16, {n}}, stream);
    sentBytes += n * static_cast<int64_t>(sizeof(float));
  }
}

void WeightSender::mark(cudaEvent_t done) {
  std::lock_guard<std::mutex> lock(sending);
  MT_CUDA_CHECK(cudaEventRecord(done, stream));
}

} // namespace mt::cuda
