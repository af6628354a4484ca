// AdamW on the device, bit for bit the host's (runtime/AdamW): a gradient's chunk squares
// summed as the host sums them, and split masters and moments updated in its fp32 operations.
#ifndef MT_RUNTIME_CUDA_KERNELS_DEVICEADAMW_H
#define MT_RUNTIME_CUDA_KERNELS_DEVICEADAMW_H

#include "runtime/AdamWConstants.h"

#include <cuda_runtime.h>

#include <cstdint>

namespace mt::cuda {

/// The squares of a gradient's `count` values into `squares`, a double for each
/// kAdamWNormChunk chunk, each summed over kAdamWSquareLanes lanes as the host's
/// adamwUpdate sums it (the same bits).
void launchChunkSquares(const float *gradient, int64_t count, double *squares, cudaStream_t stream);

/// AdamW of a parameter's elements [first, first + count): its masters' halves (`high`,
/// `low`) and moments (`m`, `v`) in device memory indexed from element `first`, its whole
/// gradient and chunk squares. `guarded`: a chunk whose squares are not finite keeps its
/// masters and moments, as the host's guarded update keeps them. `first` is a whole number of
/// chunks.
void launchAdamW(const AdamWConstants &k, uint16_t *high, uint16_t *low, float *m, float *v,
                 const float *gradient, const double *squares, int64_t first, int64_t count,
                 bool guarded, cudaStream_t stream);

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_KERNELS_DEVICEADAMW_H
