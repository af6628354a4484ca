// Public API of the ONNX frontend: a ModelProto (binary .onnx or ONNX text) into an mlir
// module of graph-level mt ops.
#ifndef MT_FRONTEND_ONNXIMPORTER_H
#define MT_FRONTEND_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mt {

struct ImportOptions {
  /// Static shapes for graph inputs with free dimensions: input name -> every dimension,
  /// written on the command line as `--input-shape input_ids:4x32`. An input whose shape
  /// has a free dimension and no entry here is an error naming it.
  llvm::StringMap<llvm::SmallVector<int64_t, 4>> inputShapes;
  /// Name of the function holding the model's computation.
  std::string functionName = "forward";
};

/// Parses "NAME:4x32" into `options.inputShapes`.
llvm::Error parseInputShape(llvm::StringRef spec, ImportOptions &options);

/// Imports the model at `path` (binary protobuf, or ONNX text when the name ends in
/// `.onnxtxt`). Weight bytes are never read: parameters refer to where they lie. On a bad
/// model, reports errors naming the node, op type and opset through the context's
/// diagnostics and returns null.
mlir::OwningOpRef<mlir::ModuleOp> importOnnxModel(llvm::StringRef path,
                                                  mlir::MLIRContext &context,
                                                  const ImportOptions &options);

} // namespace mt

#endif // MT_FRONTEND_ONNXIMPORTER_H
