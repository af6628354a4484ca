// Reads an ONNX ModelProto from binary protobuf or ONNX's text syntax.
#ifndef MT_FRONTEND_MODELREADER_H
#define MT_FRONTEND_MODELREADER_H

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LogicalResult.h"
#include "onnx/onnx_pb.h"
#include "llvm/ADT/StringRef.h"

namespace mt {

/// Binary protobuf, or ONNX text when `path` ends in `.onnxtxt`; errors go to the context's
/// diagnostics, located at the file.
mlir::LogicalResult readModel(llvm::StringRef path, mlir::MLIRContext &context,
                              onnx::ModelProto &model);

} // namespace mt

#endif // MT_FRONTEND_MODELREADER_H
