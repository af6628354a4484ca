// Which tensors of the step live on the device, how big they are and from which op to which:
// what mt-assign-buffers places and mt-assign-streams orders reuse by.
#ifndef MT_PASSES_BUFFERLIVENESS_H
#define MT_PASSES_BUFFERLIVENESS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>
#include <map>
#include <vector>

namespace mt {

/// The module attribute that makes device floats this many bytes (4: fp32 storage) instead
/// of bf16's 2.
constexpr const char *kDeviceFloatBytes = "mt.device_float_bytes";

/// The argument attribute of a layer's backward template that takes an attention's
/// log-sum-exp from the layer's forward (mt-autodiff's saving layers): fp32 on the device,
/// as where the attention makes it.
constexpr const char *kLogSumExpArgument = "mt.log_sum_exp";

/// One device buffer: a result of an op (resultIndex >= 0) or a call's workspace (-1).
struct DeviceBuffer {
  mlir::Operation *op = nullptr;
  int resultIndex = -1;
  int64_t bytes = 0;
  size_t first = 0, last = 0; // op positions in the step's block (a persistent weight's: all)
  int64_t offset = -1;
};

struct BufferLiveness {
  std::vector<mlir::Operation *> ops; // the step's ops in order
  std::vector<DeviceBuffer> buffers;  // in order of `first`
};

/// The ops that read `value`, looking through the mt.await ops that pass a copy's values on
/// (their results are the same bytes).
llvm::SmallVector<mlir::Operation *> readersOf(mlir::Value value);

/// The device buffers of a step: results of ops that run on the device or copy to it, block
/// arguments (token inputs) from the start, and each call's template workspace.
BufferLiveness analyzeBuffers(mlir::func::FuncOp step);

/// The bytes `value` takes on the device: bf16 floats (or the module's kDeviceFloatBytes),
/// fp32 for scalars and values leaving the device or the step as gradients or the loss,
/// integers at their width.
int64_t deviceBytes(mlir::Value value);

/// The operand that `result` is summed into (a product's addend, an accumulating call's
/// trailing argument), or null: the result may take its buffer when it dies there.
mlir::Value accumulatorOf(mlir::OpResult result);

/// Whether an op's results live on the device (not parameter reads, constants, offloads, or
/// awaits, whose results are their copy's).
bool producesDeviceValues(mlir::Operation *op);

/// The peak bytes of results alive at once when `ops` run in order: each result from its op
/// to its last use among `ops`; one used after them (returned) stays to the end.
int64_t peakLiveBytes(llvm::ArrayRef<mlir::Operation *> ops);

/// Free ranges of a device arena, kept merged, each placement 256-byte aligned; first fit,
/// and the arena grows at its end when nothing fits.
class DeviceArena {
public:
  int64_t allocate(int64_t bytes);
  void release(int64_t offset, int64_t bytes);
  int64_t size() const { return top; }

private:
  std::map<int64_t, int64_t> free;
  int64_t top = 0;
};

/// Whether `reshape`'s result is a view of its operand, sharing its device buffer: in a layer
/// template, of an intermediate the template makes (not an argument), at the same bytes. Its
/// kernel then copies nothing.
bool isReshapeView(mlir::Operation *reshape);

/// Places a template's intermediates (its ops but constants) in a workspace of their own,
/// each from its op to its last use (returned ones to the end), and returns the
/// workspace's bytes. A reshape view shares its operand's buffer, which then lives to the
/// last use of either. With `annotate`, sets mt.offsets/mt.sizes on the ops, relative to the
/// workspace, as mt-assign-buffers does on the step.
int64_t layoutTemplate(mlir::func::FuncOp function, bool annotate);

/// The workspace a call of `function` needs: layoutTemplate's bytes.
int64_t templateWorkspaceBytes(mlir::func::FuncOp function);

} // namespace mt

#endif // MT_PASSES_BUFFERLIVENESS_H
