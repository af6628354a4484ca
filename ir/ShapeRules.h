// Result shapes of mt ops, one rule per op family. The frontend uses them to type the ops it
// builds and the verifiers to check them, so both agree by construction.
#ifndef MT_IR_SHAPERULES_H
#define MT_IR_SHAPERULES_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace mt {

using Shape = llvm::SmallVector<int64_t, 4>;
/// Reports why a rule failed, at the caller's location (an op or an ONNX node).
using EmitError = llvm::function_ref<mlir::InFlightDiagnostic()>;

/// "[2, 16, 32]", for messages.
std::string formatShape(llvm::ArrayRef<int64_t> shape);
int64_t numElements(llvm::ArrayRef<int64_t> shape);

/// Numpy broadcasting of two shapes.
mlir::FailureOr<Shape> broadcastShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                                      EmitError emitError);
/// Batched matrix product; each flag transposes its operand's last two axes.
mlir::FailureOr<Shape> matmulShape(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                                   bool transposeLhs, bool transposeRhs, EmitError emitError);
/// input [..., K] times weight [K, N] (or [N, K] when transposed), bias [N].
mlir::FailureOr<Shape> linearShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> weight,
                                   std::optional<llvm::ArrayRef<int64_t>> bias,
                                   bool transposeWeight, EmitError emitError);
/// Axes must be in range, ascending and unique.
mlir::FailureOr<Shape> reduceShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> axes,
                                   bool keepDims, EmitError emitError);
mlir::FailureOr<Shape> transposeShape(llvm::ArrayRef<int64_t> input,
                                      llvm::ArrayRef<int64_t> permutation, EmitError emitError);
mlir::FailureOr<Shape> sliceShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> starts,
                                  llvm::ArrayRef<int64_t> limits, llvm::ArrayRef<int64_t> strides,
                                  EmitError emitError);
mlir::FailureOr<Shape> concatShape(llvm::ArrayRef<Shape> inputs, int64_t axis,
                                   EmitError emitError);
mlir::FailureOr<Shape> gatherShape(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> indices,
                                   int64_t axis, EmitError emitError);
/// query [B, Hq, T, D], key [B, Hkv, S, D], value [B, Hkv, S, Dv] -> [B, Hq, T, Dv]; with
/// `sequenceMajor` each [B, T, H, D] instead.
mlir::FailureOr<Shape> attentionShape(llvm::ArrayRef<int64_t> query, llvm::ArrayRef<int64_t> key,
                                      llvm::ArrayRef<int64_t> value, bool causal,
                                      bool sequenceMajor, EmitError emitError);
/// True when `input` broadcasts to `target` without changing `target`.
bool broadcastsTo(llvm::ArrayRef<int64_t> input, llvm::ArrayRef<int64_t> target);

} // namespace mt

#endif // MT_IR_SHAPERULES_H
