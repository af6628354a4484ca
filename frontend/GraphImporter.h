// The state of one ONNX graph's import, shared by the graph walk (OnnxImporter.cpp) and the
// translation of each node (NodeImporter.cpp).
#ifndef MT_FRONTEND_GRAPHIMPORTER_H
#define MT_FRONTEND_GRAPHIMPORTER_H

#include "frontend/ExportSignature.h"
#include "frontend/HostTensor.h"
#include "frontend/OnnxImporter.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "onnx/onnx_pb.h"

#include <optional>

namespace mt {

/// What an ONNX value name stands for during import. A value is known (folded on the host),
/// an initializer that becomes a parameter when an op first reads it (or the transpose of
/// another's), or computed by ops;
/// `value` also caches the op that materialized a known value or a parameter.
struct ImportedValue {
  std::optional<HostTensor> known;
  const onnx::TensorProto *initializer = nullptr;
  /// The initializer whose transpose this initializer holds (an untied tied weight): read as
  /// that parameter, transposed.
  std::string transposeOf;
  mlir::Value value;
};

class GraphImporter {
public:
  GraphImporter(mlir::MLIRContext &context, const onnx::ModelProto &model,
                llvm::StringRef modelPath, const ImportOptions &options);
  mlir::OwningOpRef<mlir::ModuleOp> import();

  /// The element type for an ONNX data type, or null when mt does not support it.
  mlir::Type elementType(int32_t dataType);
  /// The location of a node, initializer or graph value: its ONNX name in the model file.
  mlir::Location locationOf(llvm::StringRef name);
  /// An error about a node, naming it, its op type and the opset: "node 'n' (Op, opset 17): ".
  mlir::InFlightDiagnostic nodeError(const onnx::NodeProto &node, llvm::StringRef name);
  /// The shape of a value whatever it stands for.
  Shape shapeOf(const ImportedValue &value);
  int32_t dataTypeOf(const ImportedValue &value);
  /// An SSA value for `value`: a constant op for a known one, a parameter read for an
  /// initializer.
  mlir::Value materialize(ImportedValue &value, mlir::Location loc);
  /// The elements of a tensor whose bytes are inline; nullopt for external data, a type the
  /// folder does not evaluate (float16, bfloat16) or fewer bytes than the shape needs.
  std::optional<HostTensor> decodeTensor(const onnx::TensorProto &tensor);

  mlir::MLIRContext &context;
  mlir::OpBuilder builder;
  llvm::StringMap<ImportedValue> values;
  int64_t opset = 0;

private:
  mlir::LogicalResult importInitializers();
  mlir::LogicalResult importInputs(mlir::Location loc);
  mlir::LogicalResult importNodes();
  /// A node's name for messages: its ONNX name, or "OpType_index" for unnamed nodes.
  std::string nodeName(int index);
  mlir::LogicalResult importOutputs(mlir::Location loc);
  mlir::Value readParameter(const onnx::TensorProto &tensor, mlir::Location loc);

  /// Where an initializer's bytes lie outside the model file. A missing length means "the
  /// tensor's size", which the parameter verifier then checks.
  struct ExternalData {
    std::string file;
    int64_t offset = 0, length = -1;
  };
  ExternalData externalDataOf(const onnx::TensorProto &tensor);
  /// The bytes of a non-parameter external initializer (masks, index tables): those fold,
  /// so they are read; parameters' bytes never are.
  std::optional<std::string> readExternalData(const onnx::TensorProto &tensor);

  const onnx::ModelProto &model;
  std::string modelPath;
  const ImportOptions &options;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp function;
  /// Parameter reads sit at the top of the function, in order of first use, so that every
  /// use is dominated; the next one goes after `lastParameterRead`.
  mlir::Operation *lastParameterRead = nullptr;
  llvm::StringMap<mlir::Value> parameters;
  /// What torch's dynamo exporter says of the initializers (empty for other exporters).
  ExportSignature signature;
};

/// Translates one node: reads its inputs and attributes, folds it when every input is
/// known, otherwise builds mt ops; errors name the node, its op type and the opset.
mlir::LogicalResult importNode(GraphImporter &graph, const onnx::NodeProto &node,
                               llvm::StringRef name);

} // namespace mt

#endif // MT_FRONTEND_GRAPHIMPORTER_H
