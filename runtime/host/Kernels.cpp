// The entry point of the host kernels: finds the kernel of a command's op among those the
// family files register.
#include "runtime/host/Kernels.h"
#include "runtime/host/KernelSupport.h"

namespace mt::host {

template <typename T>
void runKernel(const plan::Command &command, const std::vector<const HostTensor<T> *> &operands,
               const std::vector<HostTensor<T> *> &results) {
  static const detail::KernelMap<T> kernels = [] {
    detail::KernelMap<T> map;
    detail::addElementwiseKernels(map);
    detail::addLinalgKernels(map);
    detail::addNormalizationKernels(map);
    detail::addTransformerKernels(map);
    detail::addViewKernels(map);
    return map;
  }();
  detail::Args<T> args{command, operands, results};
  auto kernel = kernels.find(command.op());
  if (kernel == kernels.end())
    args.fail("the host backend has no kernel for this op");
  kernel->second(args);
}

template void runKernel<float>(const plan::Command &,
                               const std::vector<const HostTensor<float> *> &,
                               const std::vector<HostTensor<float> *> &);
template void runKernel<double>(const plan::Command &,
                                const std::vector<const HostTensor<double> *> &,
                                const std::vector<HostTensor<double> *> &);

} // namespace mt::host
