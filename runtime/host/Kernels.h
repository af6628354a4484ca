// The host backend's kernels: one per mt op (graph and gradient ops), on the CPU, in the
// precision T the executor runs in.
#ifndef MT_RUNTIME_HOST_KERNELS_H
#define MT_RUNTIME_HOST_KERNELS_H

#include "plan/plan.pb.h"
#include "runtime/host/HostTensor.h"

#include <stdexcept>
#include <vector>

namespace mt::host {

/// A kernel failed on bad data or the plan named an op this backend has no kernel for; the
/// message names the op and its location.
struct KernelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Runs `command` on its operands. The executor has sized every result from the plan (shape,
/// isFloat, zero-filled storage); the kernel writes all of its elements.
template <typename T>
void runKernel(const plan::Command &command, const std::vector<const HostTensor<T> *> &operands,
               const std::vector<HostTensor<T> *> &results);

extern template void runKernel<float>(const plan::Command &,
                                      const std::vector<const HostTensor<float> *> &,
                                      const std::vector<HostTensor<float> *> &);
extern template void runKernel<double>(const plan::Command &,
                                       const std::vector<const HostTensor<double> *> &,
                                       const std::vector<HostTensor<double> *> &);

} // namespace mt::host

#endif // MT_RUNTIME_HOST_KERNELS_H
