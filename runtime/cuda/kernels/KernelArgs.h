// What a device kernel gets: its command's operands and results on the device, attributes
// with errors that name the op, the compute stream, the one cuBLASLt owner and scratch
// memory. It includes no protobuf header, so the .cu files compile without one.
#ifndef MT_RUNTIME_CUDA_KERNELS_KERNELARGS_H
#define MT_RUNTIME_CUDA_KERNELS_KERNELARGS_H

#include "runtime/cuda/DeviceTensor.h"

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace mt::plan {
class Command;
}

namespace mt::cuda {

class CublasLt;
class CudnnAttention;
class Scratch;

/// A kernel failed on its inputs, or the plan named an op without a device kernel; the
/// message names the op and its location.
struct DeviceKernelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class KernelArgs {
public:
  KernelArgs(const plan::Command &command, std::vector<DeviceTensor> operands,
             std::vector<DeviceTensor> results, cudaStream_t stream, CublasLt &blas,
             CudnnAttention *cudnn, Scratch &scratch);

  const std::string &op() const;
  [[noreturn]] void fail(const std::string &message) const;
  /// Checks the operand and result counts.
  void expectCounts(size_t minOperands, size_t maxOperands, size_t minResults,
                    size_t maxResults) const;
  void expectCounts(size_t minOperands, size_t maxOperands, size_t count) const {
    expectCounts(minOperands, maxOperands, count, count);
  }

  size_t operandCount() const { return operands.size(); }
  size_t resultCount() const { return results.size(); }
  const DeviceTensor &in(size_t i) const { return operands.at(i); }
  const DeviceTensor &out(size_t i) const { return results.at(i); }
  /// The operand or result, which must hold reals (F32 or BF16) / integers.
  const DeviceTensor &real(size_t operand) const;
  const DeviceTensor &integer(size_t operand) const;
  const DeviceTensor &realResult(size_t result) const;

  bool has(const char *name) const;
  int64_t attrInt(const char *name) const;
  /// An integer attribute is read as a number too.
  double attrFloat(const char *name) const;
  std::string attrString(const char *name, const std::string &fallback) const;
  std::vector<int64_t> attrInts(const char *name) const;
  bool flag(const char *name) const;
  /// An axis attribute normalized against `rank` (negative counts from the back).
  int64_t axis(const char *name, size_t rank) const;
  /// The strides of `shape` read as `target` under numpy broadcasting: 0 on broadcast axes.
  std::vector<int64_t> broadcastStrides(const std::vector<int64_t> &shape,
                                        const std::vector<int64_t> &target) const;

  /// Device memory for this command's temporaries, `bytes` rounded up to 256; each call
  /// returns a region of its own, valid for the work this command enqueues on `stream`.
  /// Fails, naming the op, beyond what the plan reserves for the op (passes/DeviceReserve).
  void *scratch(size_t bytes) const;
  /// The same, or null beyond what the plan reserves (for work that has another way).
  void *scratchIfFree(size_t bytes) const;

  cudaStream_t stream;
  CublasLt &blas;
  /// Fused attention through cuDNN, or null (mt's own kernels).
  CudnnAttention *cudnn;

private:
  const plan::Command &command;
  std::vector<DeviceTensor> operands, results;
  Scratch &scratchMemory;
};

/// Throws naming the op when the last launch failed.
void checkLaunch(const KernelArgs &args);

using DeviceKernel = void (*)(const KernelArgs &);
using DeviceKernelMap = std::unordered_map<std::string, DeviceKernel>;

// Each family file registers its ops' kernels.
void addElementwiseKernels(DeviceKernelMap &kernels);
void addLinalgKernels(DeviceKernelMap &kernels);
void addNormalizationKernels(DeviceKernelMap &kernels);
void addTransformerKernels(DeviceKernelMap &kernels);
void addViewKernels(DeviceKernelMap &kernels);

/// Runs `args`'s command with the kernel registered for its op.
void runDeviceKernel(const KernelArgs &args);

} // namespace mt::cuda

#endif // MT_RUNTIME_CUDA_KERNELS_KERNELARGS_H
