// Moves the bytes of parameters stored inline in an ONNX model into a weights file beside
// the plan, so that mt-run reads every parameter from (file, offset, length) without ONNX.
#ifndef MT_FRONTEND_INLINEWEIGHTS_H
#define MT_FRONTEND_INLINEWEIGHTS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"

namespace mt {

/// For each mt.parameter without external data, appends its initializer's bytes (read from
/// the model named by the module's `mt.source`) to the file `writtenPath` and points the
/// parameter at `weightsPath`, where the caller moves that file once everything it writes is
/// complete. Returns whether it wrote the file: not when every parameter is external.
/// Parameters of a module that did not come from ONNX keep no data (mt-run then needs
/// --init=random).
mlir::FailureOr<bool> writeInlineWeights(mlir::ModuleOp module, llvm::StringRef weightsPath,
                                         llvm::StringRef writtenPath);

} // namespace mt

#endif // MT_FRONTEND_INLINEWEIGHTS_H
