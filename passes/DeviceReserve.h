// Device memory a scheduled step needs beside its arena: the scratch its CUDA kernels may ask
// for, the cuBLASLt workspace, the token inputs and the constants. With the arena it is the
// plan's peak device memory; the CUDA backend allocates exactly this and fails, naming the op,
// if a kernel asks for more scratch than the plan reserved.
#ifndef MT_PASSES_DEVICERESERVE_H
#define MT_PASSES_DEVICERESERVE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>

namespace mt {

struct DeviceReserve {
  int64_t scratch = 0;   // the most one command's kernels ask for
  /// The cuBLASLt workspace: the largest product's fp32 output, between 1 and 32 MiB (split-K
  /// products need room in proportion to their output; small models need little).
  int64_t blasWorkspace = 0;
  int64_t inputs = 0;    // token inputs, 256-byte aligned each
  int64_t constants = 0; // constants of the step and its templates (fp32 reals), aligned
  /// Where fp32 masters land before the h2d stream casts them into a bf16 slot (streamed
  /// masters, kStreamMasters): the largest such parameter, at most kMostStagingBytes a piece.
  int64_t staging = 0;
  int64_t total() const { return scratch + blasWorkspace + inputs + constants + staging; }
};

/// The module attribute (a bool) that makes prefetch stream the fp32 masters instead of the
/// host's bf16 copies: mt-fit-step's choice, which the plan carries as `stream_masters`.
constexpr const char *kStreamMasters = "mt.stream_masters";

/// The largest piece a master crosses PCIe in when it is cast on the device: larger pieces
/// save nothing (the copy engine is at full speed well below it).
constexpr int64_t kMostStagingBytes = 64 << 20;

/// The scratch the CUDA kernels of `op` may ask for: fp32 partial sums of reductions and
/// norm gradients, per-row statistics of attention and cross-entropy, an fp32 table for a
/// bf16 scatter-add, a bf16 copy of an fp32 operand of a bf16 product. The contract between
/// the compiler and runtime/cuda/kernels.
int64_t kernelScratchBytes(mlir::Operation *op);

/// The reserve of a scheduled module's @train_step and the templates it calls.
DeviceReserve deviceReserve(mlir::ModuleOp module);

/// A scheduled module's peak device memory: its arena (`mt.arena_bytes`) and the reserve.
int64_t peakDeviceBytes(mlir::ModuleOp module);

} // namespace mt

#endif // MT_PASSES_DEVICERESERVE_H
