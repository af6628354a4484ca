// The kernels' view of a command: attributes and checks, with errors naming the op, and the
// registry that finds an op's kernel among those the family files register.
#include "runtime/cuda/kernels/KernelArgs.h"

#include "plan/plan.pb.h"
#include "runtime/KernelShapes.h"
#include "runtime/CommandView.h"
#include "runtime/cuda/Scratch.h"

namespace mt::cuda {

KernelArgs::KernelArgs(const plan::Command &command, std::vector<DeviceTensor> operands,
                       std::vector<DeviceTensor> results, cudaStream_t stream, CublasLt &blas,
                       CudnnAttention *cudnn, Scratch &scratch)
    : stream(stream), blas(blas), cudnn(cudnn), command(command), operands(std::move(operands)),
      results(std::move(results)), scratchMemory(scratch) {}

namespace {

CommandView<DeviceKernelError> viewOf(const plan::Command &command) { return {command}; }

} // namespace

const std::string &KernelArgs::op() const { return command.op(); }

void KernelArgs::fail(const std::string &message) const { viewOf(command).fail(message); }

void KernelArgs::expectCounts(size_t minOperands, size_t maxOperands, size_t minResults,
                              size_t maxResults) const {
  viewOf(command).expectCounts(operands.size(), minOperands, maxOperands, results.size(),
                               minResults, maxResults);
}

const DeviceTensor &KernelArgs::real(size_t operand) const {
  if (!in(operand).isFloat())
    fail("operand " + std::to_string(operand) + " must be a float tensor");
  return in(operand);
}

const DeviceTensor &KernelArgs::integer(size_t operand) const {
  if (in(operand).isFloat())
    fail("operand " + std::to_string(operand) + " must be an integer tensor");
  return in(operand);
}

const DeviceTensor &KernelArgs::realResult(size_t result) const {
  if (!out(result).isFloat())
    fail("result " + std::to_string(result) + " must be a float tensor");
  return out(result);
}

bool KernelArgs::has(const char *name) const { return viewOf(command).find(name) != nullptr; }
int64_t KernelArgs::attrInt(const char *name) const { return viewOf(command).attrInt(name); }
double KernelArgs::attrFloat(const char *name) const { return viewOf(command).attrFloat(name); }
std::string KernelArgs::attrString(const char *name, const std::string &fallback) const {
  return viewOf(command).attrString(name, fallback);
}
std::vector<int64_t> KernelArgs::attrInts(const char *name) const {
  return viewOf(command).attrInts(name);
}
bool KernelArgs::flag(const char *name) const { return viewOf(command).flag(name); }
int64_t KernelArgs::axis(const char *name, size_t rank) const {
  return viewOf(command).axis(name, rank);
}

std::vector<int64_t> KernelArgs::broadcastStrides(const std::vector<int64_t> &shape,
                                                  const std::vector<int64_t> &target) const {
  std::vector<int64_t> strides;
  if (std::string error = mt::broadcastStrides(shape, target, strides); !error.empty())
    fail(error);
  return strides;
}

void *KernelArgs::scratch(size_t bytes) const {
  void *region = scratchMemory.take(bytes);
  if (!region)
    fail("its kernels ask for " + std::to_string(bytes) + " more bytes of scratch than the " +
         std::to_string(scratchMemory.capacity()) +
         " the plan reserves (passes/DeviceReserve.cpp no longer matches the kernel)");
  return region;
}

void *KernelArgs::scratchIfFree(size_t bytes) const { return scratchMemory.take(bytes); }

void checkLaunch(const KernelArgs &args) {
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    args.fail(std::string("kernel launch failed: ") + cudaGetErrorString(status));
}

void runDeviceKernel(const KernelArgs &args) {
  static const DeviceKernelMap kernels = [] {
    DeviceKernelMap map;
    addElementwiseKernels(map);
    addLinalgKernels(map);
    addNormalizationKernels(map);
    addTransformerKernels(map);
    addViewKernels(map);
    return map;
  }();
  auto kernel = kernels.find(args.op());
  if (kernel == kernels.end())
    args.fail("the CUDA backend has no kernel for this op");
  kernel->second(args);
}

} // namespace mt::cuda
