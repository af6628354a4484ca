// What the device's products share (mt.matmul, mt.linear and the fused loss): the type both
// operands are multiplied in, operands converted to it, and a result's type. CUDA only.
#ifndef MT_RUNTIME_CUDA_KERNELS_PRODUCTS_H
#define MT_RUNTIME_CUDA_KERNELS_PRODUCTS_H

#include "runtime/cuda/kernels/KernelArgs.h"

#include <library_types.h>

namespace mt::cuda {

/// The type operands 0 and 1 are multiplied in: fp32 when both are stored so (a plan with
/// fp32 device storage), else bf16.
cudaDataType_t productInputType(const KernelArgs &args);

/// The operand's elements in `type`: in place when the arena holds them so, else converted
/// to bf16 into scratch (an fp32 constant or gradient next to a bf16 operand).
const void *operandAs(const KernelArgs &args, size_t operand, cudaDataType_t type);

/// Enqueues `n` reals of `from` rounded to bf16 into `to`.
void convertToBf16(const KernelArgs &args, Ref from, void *to, int64_t n);

/// The type result `result` is stored in.
cudaDataType_t productOutputType(const KernelArgs &args, size_t result);

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_KERNELS_PRODUCTS_H
