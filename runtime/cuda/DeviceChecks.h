// A device step checked against the host backend's (mt-run --check-against-host,
// --check-kernels): the whole step's loss and gradients, or each kernel from its operands.
#ifndef MT_RUNTIME_CUDA_DEVICECHECKS_H
#define MT_RUNTIME_CUDA_DEVICECHECKS_H

#include "runtime/HostState.h"
#include "runtime/train/StepBackend.h"

namespace mt {

/// Runs one step from the same state on the host backend (fp32) and on the device (bf16
/// copies), prints the loss of each (its error relative to the loss, absolute below 1) and
/// the worst relative gradient error per parameter (relative to the gradient's largest
/// element), and returns the worst error. `attention`: the kernels of fused attention.
double checkAgainstHost(const plan::Plan &plan, HostState &state, const TokenInputs &inputs,
                        AttentionKernels attention);

/// Runs one step on the device with every buffer kept (serialized), then each step command
/// that is a kernel on the host backend, from the operands the device read (bf16 where the
/// device stores bf16): one kernel's error, not the graph's. Template calls are whole layers
/// and are skipped (compile with --segment-layers=false to check their kernels). Prints the
/// worst relative error (to the result's largest element) per op, and each result above
/// `tolerance`, and returns the worst of all.
double checkKernels(const plan::Plan &plan, HostState &state, const TokenInputs &inputs,
                    double tolerance, AttentionKernels attention);

} // namespace mt

#endif // MT_RUNTIME_CUDA_DEVICECHECKS_H
