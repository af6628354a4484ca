// Which tensors of the step live on the device, how big they are and from which op to which:
// what mt-assign-buffers places and mt-assign-streams orders reuse by.
#ifndef MT_PASSES_BUFFERLIVENESS_H
#define MT_PASSES_BUFFERLIVENESS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <vector>

namespace mt {

/// One device buffer: a result of an op (resultIndex >= 0) or a call's workspace (-1).
struct DeviceBuffer {
  mlir::Operation *op = nullptr;
  int resultIndex = -1;
  int64_t bytes = 0;
  size_t first = 0, last = 0; // op positions in the step's block
  int64_t offset = -1;
};

struct BufferLiveness {
  std::vector<mlir::Operation *> ops; // the step's ops in order
  std::vector<DeviceBuffer> buffers;  // in order of `first`
};

/// The device buffers of a step: results of ops that run on the device or copy to it, block
/// arguments (token inputs) from the start, and each call's template workspace.
BufferLiveness analyzeBuffers(mlir::func::FuncOp step);

/// Whether an op's results live on the device (not parameter reads, constants, offloads).
bool producesDeviceValues(mlir::Operation *op);

/// The peak bytes of results alive at once when `ops` run in order: each result from its op
/// to its last use among `ops`; one used after them (returned) stays to the end.
int64_t peakLiveBytes(llvm::ArrayRef<mlir::Operation *> ops);

/// The peak bytes of a template's intermediates (its ops but constants).
int64_t templateWorkspaceBytes(mlir::func::FuncOp function);

} // namespace mt

#endif // MT_PASSES_BUFFERLIVENESS_H
