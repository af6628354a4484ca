// Faults the GPU suite injects to test how a run fails (MT_INJECT_FAULT): a kernel that traps
// during a chosen step ("step:N", a real, sticky CUDA error), and a failed registration of
// pinned host memory ("pin"). Unset, nothing is injected.
#ifndef MT_RUNTIME_CUDA_FAULTINJECTION_H
#define MT_RUNTIME_CUDA_FAULTINJECTION_H

#include <cuda_runtime.h>

#include <cstdint>

namespace mt::cuda {

/// The step during which a kernel traps, or -1.
int64_t injectedFaultStep();
/// Whether registering pinned host memory fails.
bool injectedPinFault();
/// Launches a kernel that traps on `stream`: every later CUDA call of the process fails.
void launchTrap(cudaStream_t stream);

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_FAULTINJECTION_H
